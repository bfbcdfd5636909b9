"""benchmarks._device with the shared options (benchmarks._options): ``--host-devices`` splits the
CPU before JAX starts; a bad value is one error line and exit status 2."""

import os
import subprocess
import sys

PROBE = (
    "import jax\n"
    "from benchmarks._device import select_device\n"
    "from benchmarks._options import parser\n"
    "p = parser('probe.py', None, quick='-', device=True)\n"
    "args = p.parse_args(sys_args)\n"
    "select_device(args)\n"
    "print(jax.device_count(), os.environ['PJRT_NPROC'])\n"
)


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PJRT_NPROC", "NPROC")}
    env.pop("BANDITS_JAX_THREADS", None)
    code = f"import os\nsys_args = {list(argv)!r}\n" + PROBE
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_host_devices_split_the_cpu_with_one_thread_each():
    out = _run("--device", "cpu", "--host-devices", "2")
    assert out.returncode == 0, out.stderr
    # Two host devices, one compute thread each and one spare each (threads.pool_size).
    assert out.stdout.split() == ["2", "4"]


def test_bad_host_devices_is_one_error_line():
    out = _run("--host-devices", "0")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "python -m benchmarks.probe: error: argument --host-devices: expected a positive int, "
        "got '0'"
    )
