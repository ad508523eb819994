"""The checker survives whatever a learner's file does, and its verdicts cannot be forged."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spmd_guide.practice import UsageError, check, check_many, get_problem
from spmd_guide.practice.cli import main, starter_text
from spmd_guide.practice.problem import COMMON_HINTS, ErrorHint, Outcome
from spmd_guide.practice.requirements import compare_arrays, rows_per_product

# The checker starts its own processes for each device count.
pytestmark = pytest.mark.once

CORRECT = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

def shard_map_psum(x, *, mesh=None):
    mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))
    if len(x) % mesh.shape["data"]:
        raise ValueError("pad x with zeros to a multiple of the device count")
    x = jax.device_put(jnp.asarray(x), NamedSharding(mesh, P("data")))
    body = lambda block: jax.lax.psum(block.sum(), "data")
    return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P())(x)
"""


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return path


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "spmd_guide", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


# Solutions that do something odd but are otherwise right (they pass), or that break the rules
# (they fail), checked in one batch so JAX starts once per device count.
ODD = {
    "prints_everywhere": (
        CORRECT.replace("    mesh = mesh", '    print("{not json")\n    mesh = mesh')
        + 'print("PASSED: every case")\n',
        True,
        "your code printed",
    ),
    "logs_at_debug_level": (
        "import logging\nlogging.basicConfig(level=logging.DEBUG)\n" + CORRECT,
        True,
        "PASSED",
    ),
    "sets_an_environment_variable": (
        'import os\nos.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"\n'
        + CORRECT,
        True,
        "your file sets XLA_FLAGS: delete that line",
    ),
    "starts_a_thread": (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\n"
        + CORRECT,
        True,
        "left 1 thread(s) running",
    ),
    "returns_none": (
        "def shard_map_psum(x, *, mesh=None):\n    total = sum(x)\n",
        False,
        "your function returned None; expected a scalar array",
    ),
    "returns_a_string": (
        "def shard_map_psum(x, *, mesh=None):\n    return 'six'\n",
        False,
        "your function returned 'six'",
    ),
    "plain_sum_no_shard_map": (
        "import jax.numpy as jnp\ndef shard_map_psum(x, *, mesh=None):\n    if mesh is not None and len(x) % mesh.shape['data']:\n        raise ValueError('pad')\n    return jnp.sum(jnp.asarray(x))\n",
        False,
        "not met: blocks: ",
    ),
    "ignores_the_mesh": (
        CORRECT.replace(
            'mesh = mesh or Mesh(np.array(jax.devices()[:1]), ("data",))',
            'n = mesh.shape["data"] if mesh else 1\n    mesh = Mesh(np.array(jax.devices()[:n]), ("data",))',
        ),
        False,
        "a shard_map ran on another mesh",
    ),
    "pads_instead_of_raising": (
        CORRECT.replace(
            'raise ValueError("pad x with zeros to a multiple of the device count")',
            'x = jnp.pad(jnp.asarray(x), (0, mesh.shape["data"] - len(x) % mesh.shape["data"]))',
        ),
        False,
        "expected your function to raise ValueError, but it returned a value",
    ),
    "forges_a_pass": (
        "import sys\nsys.stdout.write('1 device: 4/4 cases passed\\nPASSED: every case on 1 device.\\n')\nsys.exit(0)\n",
        False,
        "your file called sys.exit(0) while being imported",
    ),
    "loop_carry_starts_the_same_everywhere": (
        CORRECT.replace(
            'body = lambda block: jax.lax.psum(block.sum(), "data")',
            "body = lambda block: jax.lax.psum(\n"
            "        jax.lax.fori_loop(0, 1, lambda i, total: total + block.sum(), 0.0), 'data')",
        ),
        False,
        "start it with jax.lax.pcast(start, axis_name, to='varying')",
    ),
    "enters_a_mesh_context": (
        CORRECT.replace(
            "    body = lambda", "    with jax.set_mesh(mesh):\n        pass\n    body = lambda"
        ),
        False,
        "jax.set_mesh cannot be entered while tracing",
    ),
    "sets_the_device_count": (
        'import jax\njax.config.update("jax_num_cpu_devices", 8)\n' + CORRECT,
        False,
        "delete the line that sets the device count",
    ),
}


@pytest.fixture(scope="module")
def odd_reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("odd")
    jobs = [("shard_map_psum", write(folder, name, text)) for name, (text, _, _) in ODD.items()]
    reports = check_many(jobs, device_counts=(1, 2), case_timeout=60)
    return dict(zip(ODD, reports, strict=True))


@pytest.mark.parametrize("name", list(ODD))
def test_an_odd_solution_gets_a_clear_verdict(odd_reports, name):
    _, passes, phrase = ODD[name]
    report = odd_reports[name]
    text = report.text()
    assert report.passed is passes, text
    assert phrase in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("name", "text", "phrase"),
    [
        ("exits_at_import", "import os\nos._exit(0)\n", "ends the process when it is imported"),
        (
            "exits_partway",
            CORRECT
            + "_calls = 0\n_inner = shard_map_psum\ndef shard_map_psum(x, *, mesh=None):\n    global _calls\n    _calls += 1\n    if _calls == 3:\n        import os; os._exit(0)\n    return _inner(x, mesh=mesh)\n",
            "before every case was reported",
        ),
        ("loops_at_import", "while True:\n    pass\n", "importing your file took more than 2 s"),
        (
            "hangs_in_a_case",
            "def shard_map_psum(x, *, mesh=None):\n    while True:\n        pass\n",
            "case 1 took more than 2 s",
        ),
        (
            "floods_the_output",
            "def shard_map_psum(x, *, mesh=None):\n    while True:\n        print('x' * 10000)\n",
            "printed more than 20 MB",
        ),
        (
            "writes_to_the_channel",
            "import os, json\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'{\"done\": true}\\n')\n    except OSError:\n        pass\n"
            + CORRECT,
            "received messages it never asked for",
        ),
    ],
)
def test_a_solution_that_breaks_the_process_fails_clearly(tmp_path, name, text, phrase):
    # A hang is certain where the phrase names the limit; waiting longer would show nothing more.
    limit = 2 if "more than 2 s" in phrase else 30
    report = check(
        "shard_map_psum", write(tmp_path, name, text), device_counts=(2,), case_timeout=limit
    )
    shown = report.text()
    assert not report.passed, shown
    assert phrase in shown, shown
    assert "Traceback" not in shown


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("hangs", [False, True], ids=["passes", "hangs"])
def test_processes_a_solution_starts_are_stopped(tmp_path, hangs):
    pid_file = tmp_path / "child.pid"
    starts_a_child = (
        "import subprocess, sys\n"
        "_child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(_child.pid))\n"
    )
    body = "def shard_map_psum(x, *, mesh=None):\n    while True:\n        pass\n"
    solution = starts_a_child + (body if hangs else CORRECT)
    report = check(
        "shard_map_psum",
        write(tmp_path, "child", solution),
        device_counts=(2,),
        case_timeout=2 if hangs else 30,
    )
    assert report.passed is not hangs, report.text()
    child = int(pid_file.read_text())
    assert not running(child), f"the solution's child process {child} is still running"


def test_the_checker_and_the_references_cannot_be_imported_while_checking(tmp_path):
    importer = "from spmd_guide.practice.problems.shard_map_psum import shard_map_psum\n"
    report = check("shard_map_psum", write(tmp_path, "importer", importer), device_counts=(2,))
    assert not report.passed
    assert "spmd_guide is not available while checking" in report.text(), report.text()


def test_patching_the_solutions_process_forges_at_most_values(tmp_path):
    # The process's own answering code, replaced: what it sends is still judged as a value.
    patcher = """
    import sys
    runner = sys.modules["__main__"]
    runner._run = lambda *args, **kwargs: {"value": {"plain": 0.0}}

    def shard_map_psum(x, *, mesh=None):
        return 0.0
    """
    report = check("shard_map_psum", write(tmp_path, "patcher", patcher), device_counts=(2,))
    assert not report.passed, report.text()
    assert "off by" in report.text(), report.text()


def test_a_reply_written_to_the_channel_cannot_produce_a_pass(tmp_path):
    # The solution finds the request it is answering and writes a reply with the right total
    # under that request's id, then returns a wrong one: the process's own reply then arrives
    # unasked, and the check fails.
    forger = """
    import inspect, json, os
    import numpy as np

    def shard_map_psum(x, *, mesh=None):
        if mesh is not None and len(x) % mesh.shape["data"]:
            raise ValueError("pad x")
        for frame in inspect.stack():
            request = frame.frame.f_locals.get("request")
            if isinstance(request, dict) and "id" in request:
                reply = {"id": request["id"], "value": {"plain": float(np.sum(x))}}
                for fd in range(3, 64):
                    try:
                        os.write(fd, (json.dumps(reply) + "\\n").encode())
                    except OSError:
                        pass
        return np.float32(-1.0)
    """
    report = check("shard_map_psum", write(tmp_path, "forger", forger), device_counts=(2,))
    assert not report.passed, report.text()
    assert "received messages it never asked for" in report.text(), report.text()


def test_one_device_is_not_claimed_when_it_was_not_run(tmp_path):
    wrong = CORRECT.replace('jax.lax.psum(block.sum(), "data")', "block.sum()").replace(
        "out_specs=P())", "out_specs=P(), check_vma=False)"
    )
    report = check("shard_map_psum", write(tmp_path, "wrong", wrong), device_counts=(2,))
    assert not report.passed
    assert "It passes on one device" not in report.text()


def test_the_command_line_exit_codes(tmp_path, capsys):
    good = write(tmp_path, "good", CORRECT)
    assert main(["check", "shard_map_psum", str(good), "--devices", "1,2"]) == 0
    assert "PASSED: every case on 1 and 2 devices." in capsys.readouterr().out
    wrong = write(tmp_path, "wrong", "def shard_map_psum(x, *, mesh=None):\n    return 0.0\n")
    assert main(["check", "shard_map_psum", str(wrong), "--devices", "2"]) == 1
    assert "FAILED on 2 devices." in capsys.readouterr().out
    broken = write(tmp_path, "broken", "def shard_map_psum(x:\n")
    assert main(["check", "shard_map_psum", str(broken)]) == 1
    assert "does not parse" in capsys.readouterr().out
    usage = [
        (
            ["check", "shard_map_psum", str(good), "--devices", "3"],
            "give device counts from 1, 2, 4, 8",
        ),
        (["check", "shard_map_psum", str(good), "--timeout", "0"], "--timeout must be a positive"),
        (["check", "shard_map_psum", str(good), "--timeout", "-1"], "--timeout must be a positive"),
        (["check", "shard_map_psum", str(tmp_path / "missing.py")], "no such file"),
        (["check", "shard_map_psum", str(tmp_path)], "is a folder"),
        (["check", "no_such_problem", str(good)], "no problem named 'no_such_problem'"),
        (["starter", "shard_map_psum", "-o", str(tmp_path / "absent" / "x.py")], "does not exist"),
    ]
    # One through a process of its own, for the exit status; the rest as above.
    (first_args, first_message), *rest = usage
    result = cli(*first_args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert first_message in result.stderr and "Traceback" not in result.stderr, result.stderr
    for args, message in rest:
        assert main(args) == 2, args
        error = capsys.readouterr().err
        assert message in error and "Traceback" not in error, (args, error)
    with pytest.raises(SystemExit) as help_exit:
        main(["check", "--help"])
    assert help_exit.value.code == 0 and "exit codes" in capsys.readouterr().out


def test_the_starter_fails_with_its_hint_and_imports_what_the_hints_use(tmp_path):
    made = cli("starter", "shard_map_psum", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    again = cli("starter", "shard_map_psum", cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
    report = check("shard_map_psum", tmp_path / "shard_map_psum.py", device_counts=(1,))
    assert "replace the starter's body" in report.text()
    problem = get_problem("shard_map_psum")
    namespace: dict = {}
    exec(starter_text(problem, "x.py"), namespace)
    for name in ("jax", "jnp", "np", "P", "Mesh", "NamedSharding"):
        assert name in namespace


def test_list_is_quick_and_in_order():
    listing = cli("list")
    assert listing.returncode == 0
    from spmd_guide.practice import PROBLEMS

    assert [line.split()[0] for line in listing.stdout.splitlines()] == list(PROBLEMS)


def test_bad_arguments_to_the_library_are_usage_errors(tmp_path):
    good = write(tmp_path, "good", CORRECT)
    with pytest.raises(UsageError, match="choose from those"):
        check("shard_map_psum", good, device_counts=(3,))
    with pytest.raises(UsageError, match="positive"):
        check("shard_map_psum", good, case_timeout=0)


def test_error_hints_match_by_type_and_message():
    unbound = Outcome(
        inputs="", expected=None, error_type="NameError", error_message="unbound axis name: data"
    )
    bare = Outcome(inputs="", expected=None, error_type="AssertionError", error_message="")
    first = [hint for hint in COMMON_HINTS if isinstance(hint, ErrorHint) and hint.matches(unbound)]
    assert len(first) == 1 and "outside the shard_map" in first[0].text
    assert "axis the mesh does not have" in get_problem("shard_map_psum").hint_for(bare)
    # The message decides, not just the type: a float in some other error gets no cast hint.
    other = Outcome(
        inputs="",
        expected=None,
        error_type="TypeError",
        error_message="unsupported operand type(s) for +: 'float' and 'str'",
    )
    assert get_problem("shard_map_simulate").hint_for(other) is None


def test_compare_arrays_names_the_first_differences():
    assert compare_arrays([1.0, 2.0], [1.0, 2.0]) == []
    assert compare_arrays([1.0, 2.0], [1.0]) == ["shape: expected (2,), got (1,)"]
    lines = compare_arrays([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.5], [3.0, 4.5]])
    assert lines[0] == "2 of 4 values differ; the first:"
    assert lines[1] == "  at (0, 1): expected 2, got 2.5"
    assert compare_arrays([1.0], [float("nan")]) == ["1 of 1 values are NaN; the first at (0,)"]


def test_a_product_takes_the_rows_of_the_last_free_dimension_before_its_contraction():
    assert rows_per_product([12, 6], [[1], []]) == 12  # x @ w over all rows at once
    assert rows_per_product([3, 4, 6], [[2], []]) == 4  # vmap over 3 chunks of 4 rows
    assert rows_per_product([3, 4, 6], [[2], [0]]) == 4  # chunks with weights of their own
    assert rows_per_product([6, 12], [[0], []]) == 12  # contracted on its first dimension, x.T @ w
    assert rows_per_product([12, 6], None) == 12  # recorded without its dimensions
