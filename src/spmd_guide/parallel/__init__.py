"""Parallelism strategies written by hand with ``jax.shard_map`` and collectives.

Each module implements one strategy for a small functional MLP (:mod:`.mlp`) and is checked
against the same computation on one device: data parallel, FSDP, tensor parallel and pipeline.
"""
