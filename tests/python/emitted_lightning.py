#!/usr/bin/env python3
"""Runs dtsim's `advise --emit lightning` output with real Lightning, and
hands `--emit deepspeed` JSON to DeepSpeed's own config parser, on CPU.

    python emitted_lightning.py DTSIM

Lightning: for each case dtsim emits a Trainer; this writes a script of a
tiny LightningModule (two `Block` modules) followed by the emitted code, and
runs it: Lightning itself starts the second rank (gloo). The edits are the
CPU (`accelerator="gpu"` becomes "cpu") and the test's own Trainer arguments
(2 steps, no logger, checkpoint or progress bar). Rank 0 then checks what
the strategy reports back against the emitted settings. Lightning's
FSDPStrategy refuses a CPU accelerator, so the FSDP case builds the emitted
strategy and reads it back (sharding, offload, the wrap policy picking each
Block) without fitting.

DeepSpeed: the emitted JSON for ZeRO stages 1, 2 and 3 is parsed by
`deepspeed.runtime.config.DeepSpeedConfig`, whose batch-size check runs
against the 2 data-parallel ranks it was emitted for (DeepSpeed's `mpu`
argument), with no error, and reads back the stage and micro-batch.

Exit 0: all ran; 1: one failed; 77: lightning or deepspeed is not importable
(ctest reports the test as skipped, with the reason).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from emitted_common import emit, knob

LIGHTNING_CASES = {
    "ddp": ["strategy=ddp", "bucket_cap_mb=1"],
    "ddp fp16 hook": ["strategy=ddp", "comm_hook=fp16_compress"],
    "ddp bf16-true": ["strategy=ddp", "precision=bf16-true"],
    "fsdp shard grad op": ["strategy=fsdp", "sharding_strategy=SHARD_GRAD_OP"],
}
DEEPSPEED_STAGES = [1, 2, 3]

MODULE = '''
import torch
import torch.nn as nn
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), Block(), Block(), nn.Linear(32, 4))

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def on_train_start(self):
        # What the strategy wrapped the model in, while it is wrapped.
        wrapped = self.trainer.strategy.model
        self.bucket_bytes_cap = getattr(wrapped, "bucket_bytes_cap", None)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-2)

    def train_dataloader(self):
        torch.manual_seed(0)
        return DataLoader(TensorDataset(torch.randn(16, 16), torch.randn(16, 4)), batch_size=2)


torch.set_num_threads(1)
'''

CHECK = '''
module = Tiny()
trainer.fit(module)
if trainer.global_rank == 0:
    import json
    s = trainer.strategy
    report = {"strategy": type(s).__name__, "steps": trainer.global_step, "world": trainer.world_size,
              "bucket_cap_mb": s._ddp_kwargs.get("bucket_cap_mb"),
              "hook": getattr(s._ddp_comm_hook, "__name__", None), "bucket_bytes_cap": module.bucket_bytes_cap,
              "precision": str(trainer.precision), "param_dtype": str(next(module.parameters()).dtype)}
    print("REPORT " + json.dumps(report))
'''

# Lightning's FSDPStrategy refuses a CPU accelerator ("requires a GPU
# accelerator"): the emitted strategy is built and read back, not fitted.
FSDP_CHECK = '''
import json
policy = strategy.kwargs.get("auto_wrap_policy")
units = sum(bool(policy(module=m, recurse=False, nonwrapped_numel=0)) for m in Tiny().modules()) + 1
print("REPORT " + json.dumps({"strategy": type(strategy).__name__, "steps": 2, "world": 2,
                              "sharding_strategy": strategy.sharding_strategy.name,
                              "cpu_offload": strategy.cpu_offload.offload_params, "units": units}))
'''


def run_lightning(dtsim: str, name: str, axes: list[str], d: str) -> str | None:
    """None when the case ran and reported the emitted settings, else what went wrong."""
    code = emit(dtsim, "lightning", axes)
    fsdp = knob(axes, "strategy", "ddp") == "fsdp"
    if fsdp:  # up to the Trainer, which needs a GPU for FSDP
        code = code[: code.index("trainer = Trainer(")]
    code = code.replace('accelerator="gpu"', 'accelerator="cpu"')
    code = code.replace("trainer = Trainer(", "trainer = Trainer(max_steps=2, logger=False, enable_checkpointing="
                        "False, enable_progress_bar=False, enable_model_summary=False,")
    script = os.path.join(d, "run.py")
    with open(script, "w") as f:
        f.write(MODULE + code + (FSDP_CHECK if fsdp else CHECK))
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1", PL_DISABLE_FORK="1")
    for attempt in (1, 2):
        r = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, cwd=d, timeout=240)
        # gloo's teardown aborts now and then after the run ("terminate called without an active exception",
        # SIGABRT; bench/torch_xcheck/steptime.py meets it too): the case runs once more, and says so.
        if attempt == 1 and r.returncode == -6 and "terminate called without an active exception" in r.stderr:
            print(f"{name}: gloo aborted at teardown (SIGABRT); running the case again", file=sys.stderr)
            continue
        break
    lines = [l for l in r.stdout.splitlines() if l.startswith("REPORT ")]
    if r.returncode != 0 or not lines:
        return f"exit {r.returncode}: {(r.stderr.strip().splitlines() or ['no output'])[-1]}\n{code}"
    rep = json.loads(lines[0][7:])
    want_class = "DDPStrategy" if knob(axes, "strategy", "ddp") == "ddp" else "FSDPStrategy"
    problems = []
    if rep["strategy"] != want_class:
        problems.append(f"strategy {rep['strategy']}, emitted {want_class}")
    if rep["steps"] != 2 or rep["world"] != 2:
        problems.append(f"{rep['steps']} steps on {rep['world']} ranks, expected 2 on 2")
    if want_class == "DDPStrategy":
        cap = float(knob(axes, "bucket_cap_mb", "25"))
        if rep["bucket_bytes_cap"] != int(cap * 1024 * 1024):
            problems.append(f"bucket_bytes_cap {rep['bucket_bytes_cap']}, emitted {cap} MiB")
        want_hook = {"allreduce": None, "fp16_compress": "fp16_compress_hook"}[knob(axes, "comm_hook", "allreduce")]
        if rep["hook"] != want_hook:
            problems.append(f"hook {rep['hook']}, emitted {want_hook}")
        # Lightning's precision as dtsim names it, and what it did to the parameters.
        want_precision = knob(axes, "precision", "32-true")
        if rep["precision"] != want_precision:
            problems.append(f"precision {rep['precision']}, emitted {want_precision}")
        want_dtype = "torch.bfloat16" if want_precision == "bf16-true" else "torch.float32"
        if rep["param_dtype"] != want_dtype:
            problems.append(f"parameters in {rep['param_dtype']}, expected {want_dtype}")
    else:
        if rep["sharding_strategy"] != knob(axes, "sharding_strategy", "FULL_SHARD"):
            problems.append(f"sharding {rep['sharding_strategy']}")
        if rep["cpu_offload"] != (knob(axes, "cpu_offload", "false") == "true"):
            problems.append(f"cpu_offload {rep['cpu_offload']}")
        if rep["units"] != 3:
            problems.append(f"{rep['units']} FSDP units, expected one per Block and the root (3)")
    return "; ".join(problems) or None


def run_deepspeed(dtsim: str, stage: int, d: str) -> str | None:
    import deepspeed
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    path = os.path.join(d, f"ds{stage}.json")
    with open(path, "w") as f:
        f.write(emit(dtsim, "deepspeed", ["strategy=deepspeed", f"stage={stage}"]))
    if not dist.is_initialized():  # DeepSpeed's own communication layer, one gloo rank
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False,
                                   init_method="file://" + os.path.join(d, "store"), rank=0, world_size=1)

    class DataParallelOf2:  # the world the JSON was emitted for, as DeepSpeed's mpu argument says it
        @staticmethod
        def get_data_parallel_world_size():
            return 2

    try:
        cfg = DeepSpeedConfig(path, mpu=DataParallelOf2())
    except Exception as e:  # DeepSpeed's own message
        return f"{type(e).__name__}: {e}"
    with open(path) as f:
        emitted = json.load(f)
    if cfg.zero_optimization_stage != stage:
        return f"DeepSpeed read stage {cfg.zero_optimization_stage}, emitted {stage}"
    if cfg.train_micro_batch_size_per_gpu != emitted["train_micro_batch_size_per_gpu"]:
        return "micro-batch differs"
    return None


def parse_every_key(d: str) -> str | None:
    """DeepSpeed's own parser takes the file in which dtsim's reader accepts every zero_optimization key."""
    import deepspeed
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    if not dist.is_initialized():
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False,
                                   init_method="file://" + os.path.join(d, "store"), rank=0, world_size=1)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "deepspeed", "zero3_every_key.json")
    try:
        cfg = DeepSpeedConfig(path)
    except Exception as e:  # DeepSpeed's own message
        return f"{type(e).__name__}: {e}"
    with open(path) as f:
        keys = set(json.load(f)["zero_optimization"])
    # Every field of DeepSpeed's model is in the file (by name or alias), less the
    # deprecated ones whose replacements it holds.
    fields = type(cfg.zero_config).model_fields
    missing = [n for n, f in fields.items() if n not in keys and (f.alias or n) not in keys
               and n not in ("cpu_offload", "cpu_offload_param", "stage3_gather_fp16_weights_on_model_save")]
    if missing:
        return f"DeepSpeed {deepspeed.__version__} has zero_optimization keys the file lacks: {missing}"
    if cfg.zero_optimization_stage != 3:
        return f"DeepSpeed read stage {cfg.zero_optimization_stage}"
    return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import deepspeed  # noqa: F401
        import lightning  # noqa: F401
    except ImportError as e:
        print(f"SKIP: lightning and deepspeed are not importable by {sys.executable} ({e}); "
              "make them with scripts/make-venv.sh")
        return 77
    dtsim = sys.argv[1]
    failed = 0
    for name, axes in LIGHTNING_CASES.items():
        with tempfile.TemporaryDirectory() as d:
            problem = run_lightning(dtsim, name, axes, d)
        print(f"{'FAILED' if problem else 'ok'}: lightning {name}{': ' + problem if problem else ''}")
        failed += problem is not None
    with tempfile.TemporaryDirectory() as d:
        problem = parse_every_key(d)
        print(f"{'FAILED' if problem else 'ok'}: deepspeed parses tests/data/deepspeed/zero3_every_key.json "
              f"(every zero_optimization key, as dtsim's reader accepts it){': ' + problem if problem else ''}")
        failed += problem is not None
        for stage in DEEPSPEED_STAGES:
            problem = run_deepspeed(dtsim, stage, d)
            print(f"{'FAILED' if problem else 'ok'}: deepspeed stage {stage}{': ' + problem if problem else ''}")
            failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
