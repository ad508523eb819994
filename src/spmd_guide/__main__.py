"""``python -m spmd_guide``: list the practice problems, write a starter, check a solution."""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spmd_guide", description="Practice problems for SPMD in JAX."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the problems")
    starter = commands.add_parser("starter", help="write a starter file for a problem")
    starter.add_argument("problem")
    starter.add_argument("-o", "--output", help="file to write (default: PROBLEM.py)")
    check = commands.add_parser("check", help="check your solution on 1, 2, 4 and 8 CPU devices")
    check.add_argument("problem")
    check.add_argument("file", help="the Python file that defines the problem's function")
    check.add_argument("--timeout", type=float, default=None, help="seconds per case (default: 60)")
    check.add_argument(
        "--devices",
        default="1,2,4,8",
        help="comma-separated device counts to check on (default: 1,2,4,8)",
    )
    args = parser.parse_args(argv)

    from spmd_guide.problems.catalog import PROBLEMS, get_problem

    if args.command == "list":
        width = max(len(name) for name in PROBLEMS)
        for problem in PROBLEMS.values():
            print(f"{problem.name:<{width}}  {problem.difficulty:<6}  {problem.teaches}")
        return 0
    try:
        problem = get_problem(args.problem)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "starter":
        return _write_starter(problem, Path(args.output or f"{problem.name}.py"))
    from spmd_guide.checker import CASE_TIMEOUT, SolutionError, check

    try:
        counts = tuple(int(part) for part in args.devices.split(","))
        if min(counts) < 1:
            raise ValueError
    except ValueError:
        print(
            f"error: --devices {args.devices!r} must list positive counts, e.g. 1,2,4,8",
            file=sys.stderr,
        )
        return 2

    try:
        ok = check(
            problem.name,
            args.file,
            device_counts=counts,
            case_timeout=args.timeout or CASE_TIMEOUT,
        )
    except SolutionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def _write_starter(problem, path: Path) -> int:
    if path.exists():
        print(f"error: {path} exists; choose another name with --output", file=sys.stderr)
        return 2
    doc = textwrap.indent(inspect.cleandoc(problem.doc), "    ")
    path.write_text(
        f'"""Your solution to {problem.name}: {problem.title}.\n\n'
        f"Check it with: python -m spmd_guide check {problem.name} {path.name}\n"
        '"""\n\n'
        "import jax\n"
        "import jax.numpy as jnp\n"
        "from jax.sharding import Mesh, PartitionSpec as P\n\n\n"
        f"def {problem.signature}:\n"
        f'    """{doc.strip()}\n    """\n'
        '    raise NotImplementedError("write your solution here")\n'
    )
    print(f"wrote {path}; check it with: python -m spmd_guide check {problem.name} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
