"""Compiles for a GPU target every kernel an interpreter run compiles: a pytest plugin for the
upstream suites (Triton's test_core / test_standard run in the interpreter on a machine without a
GPU), so that what the GPU path refuses or breaks on in Triton's own programs shows up without a
GPU. Each distinct compile is logged as a JSON line (test, kernel, signature, warps, ok, error).

    PYTHONPATH=build/lead/pyroot:tools/upstream WW_COMPILE_CHECK_TARGET=sm_90a \\
    WW_COMPILE_CHECK_LOG=out/check.jsonl python3 tools/upstream/run_upstream.py \\
        --upstream UPSTREAM --suite triton-core --mode replace --interpret --work W --out O \\
        -- -p compile_check -m interpreter -n 2
    python3 tools/upstream/compile_check.py out/check.jsonl     # failures grouped by message

The compile goes to a cubin (ptxas) at the interpreter run's specialization and options."""
import collections
import json
import os
import re
import sys

TARGET = os.environ.get("WW_COMPILE_CHECK_TARGET", "sm_90a")
LOG = os.environ.get("WW_COMPILE_CHECK_LOG", "compile_check.jsonl")
# Comma-separated PTX fragments (`ld.global.v4,st.global.v4`): each record then says which of
# them the kernel's PTX holds, as the GPU runs of Triton's tests check.
GREP = [g for g in os.environ.get("WW_COMPILE_CHECK_GREP", "").split(",") if g]


def _install():
    import importlib

    jit = importlib.import_module("warpweave.jit")  # the module (warpweave.jit is also a function)
    interpreted_compile = jit.JITFunction._compile
    seen = set()

    def compile_and_check(self, values, key_part, kinds, interpret, options, target, trap=0):
        compiled = interpreted_compile(self, values, key_part, kinds, interpret, options, target,
                                       trap)
        request = getattr(compiled, "_request", None)  # set for interpreted kernels
        if not interpret or request is None:
            return compiled
        request = dict(request, stage="cubin", target=TARGET)
        key = repr((request["kernel"], request["signature"], [f[0] for f in request["files"]],
                    request["num_warps"], request["num_stages"], request["num_ctas"]))
        if key in seen:
            return compiled
        seen.add(key)
        record = {"test": os.environ.get("PYTEST_CURRENT_TEST", ""), "kernel": request["kernel"],
                  "sig": request["signature"], "warps": request["num_warps"], "target": TARGET,
                  "ok": True}
        try:
            kernel = jit.native().compile(**request)
            if GREP:
                record["ptx_has"] = {g: g in kernel.ptx for g in GREP}
        except Exception as e:  # every failure is a finding: compile errors and crashes alike
            record.update(ok=False, error=f"{type(e).__name__}: {e}"[:2000])
        with open(LOG, "a") as f:
            f.write(json.dumps(record) + "\n")
        return compiled

    jit.JITFunction._compile = compile_and_check


def pytest_configure(config):
    _install()


def summarize(path):
    records = [json.loads(line) for line in open(path)]
    failed = [r for r in records if not r["ok"]]
    groups = collections.defaultdict(list)
    for r in failed:
        first = r["error"].splitlines()[0]
        groups[re.sub(r"\d+", "N", re.sub(r"\S+\.py:\d+:\d+", "FILE", first))[:200]].append(r)
    targets = sorted({r.get("target", "?") for r in records})
    print(f"{len(records)} kernels compiled for {', '.join(targets)}, {len(failed)} failed")
    for message, rs in sorted(groups.items(), key=lambda g: -len(g[1])):
        print(f"{len(rs):5d}  {message}\n       e.g. {rs[0]['test']}")


if __name__ == "__main__":
    summarize(sys.argv[1])
