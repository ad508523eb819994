"""``python -m spmd_guide``: list the practice problems, write a starter, check a solution.

Exit codes: 0 the solution passed (or the command did what it was asked), 1 the solution is
wrong or cannot be used, 2 the command was used wrongly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spmd_guide.practice.catalog import PROBLEMS, get_problem
from spmd_guide.practice.checker import CASE_TIMEOUT, DEVICE_COUNTS, UsageError, check
from spmd_guide.practice.problem import Problem, statement_text

EPILOG = """exit codes:
  0  passed (or list/starter succeeded)
  1  the solution is wrong, or the file cannot be used as a solution
  2  usage error: unknown problem, missing file, bad --devices or --timeout
"""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            return _list()
        problem = get_problem(args.problem)
        if args.command == "starter":
            return _write_starter(problem, Path(args.output or f"{problem.name}.py"))
        counts = _device_counts(args.devices)
        if not args.timeout > 0:
            raise UsageError(
                f"--timeout must be a positive number of seconds, got {args.timeout:g}"
            )
        report = check(problem.name, args.file, device_counts=counts, case_timeout=args.timeout)
    except (UsageError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report.text(shown_path=args.file))
    return 0 if report.passed else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spmd_guide",
        description="Practice problems for SPMD in JAX, checked on 1, 2, 4 and 8 CPU devices.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the problems, easiest first")
    starter = commands.add_parser("starter", help="write a starter file for a problem")
    starter.add_argument("problem")
    starter.add_argument("-o", "--output", help="file to write (default: PROBLEM.py)")
    checker = commands.add_parser(
        "check",
        help="check your solution on 1, 2, 4 and 8 CPU devices",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    checker.add_argument("problem")
    checker.add_argument("file", help="the Python file that defines the problem's function")
    checker.add_argument(
        "--timeout",
        type=float,
        default=CASE_TIMEOUT,
        help=f"seconds allowed per case and for importing the file (default: {CASE_TIMEOUT:g})",
    )
    checker.add_argument(
        "--devices",
        default=",".join(map(str, DEVICE_COUNTS)),
        help="comma-separated device counts, from 1, 2, 4 and 8 (default: all four)",
    )
    return parser


def _device_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or any(count not in DEVICE_COUNTS for count in counts):
        raise UsageError(
            f"--devices {text!r}: give device counts from {', '.join(map(str, DEVICE_COUNTS))}, "
            "separated by commas, e.g. --devices 1,8"
        )
    return counts


def _list() -> int:
    width = max(len(name) for name in PROBLEMS)
    for problem in PROBLEMS.values():
        print(f"{problem.name:<{width}}  {problem.difficulty:<6}  {problem.teaches}")
    return 0


def starter_text(problem: Problem, file_name: str) -> str:
    """The starter file for ``problem``: the imports its hints use, and the statement."""
    text = f"{problem.statement}\n\n{statement_text(problem)}"
    statement = "\n".join(f"    {line}" if line else "" for line in text.splitlines())
    return (
        f'"""Your solution to {problem.name}: {problem.title}.\n\n'
        f"Check it with: python -m spmd_guide check {problem.name} {file_name}\n"
        '"""\n\n' + "\n".join(problem.starter_imports) + f"\n\n\ndef {problem.signature}:\n"
        f'    """{statement.strip()}\n    """\n'
        '    raise NotImplementedError("write your solution here")\n'
    )


def _write_starter(problem: Problem, path: Path) -> int:
    if path.exists():
        raise UsageError(f"{path} exists; choose another name with --output")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: the folder {path.parent} does not exist")
    try:
        path.write_text(starter_text(problem, path.name))
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror}") from None
    print(f"wrote {path}; check it with: python -m spmd_guide check {problem.name} {path}")
    return 0
