"""One module per practice problem: its reference solution, cases, hints and metadata.

Each module's solution sits between ``# solution`` markers, imports and all, so a page can show
it whole and a learner can copy it; :data:`PROBLEM` after it is what the checker needs.
"""
