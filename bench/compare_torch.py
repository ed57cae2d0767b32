"""CPU training speed of the engine against PyTorch on the same machine, in
the same run: for each model, one training step (forward, cross-entropy,
backward, SGD-with-momentum update) at the same batch size and thread count.
The engine runs as `poseidon time ... --json`; PyTorch runs in this process.
Measurements of the two alternate, round after round, so that a noisy
machine slows both alike. Other work on the machine only ever slows a run, so
the table reports each side's fastest round, the closest to the machine's own
speed, next to the median of the per-round ratios. With --precision bf16
PyTorch runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)
and the engine gets `poseidon time --precision bf16`; in fp32 the engine is
called without the flag. --baseline times a second engine binary (say, one
built before a change) in the same rounds, so that before and after meet
the same machine. --compile also times PyTorch with the model under
torch.compile (inductor, its default backend) in the same rounds, beside
eager PyTorch: the model is compiled, and its first steps (which compile it)
run, before any round starts."""

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

# PyTorch runs in its own default setting unless --passive-peer is given:
# its bundled OpenMP then waits passively, and so does the engine, which
# inherits the environment (its own default is a short spin). On cores
# shared with other busy work PyTorch's long spins run several times slower,
# which compares wait policies, not engines; the flag is for such a machine
# and the table says which was used. It must be set before torch loads its
# OpenMP runtime, hence read from argv here.
PASSIVE_PEER = "--passive-peer" in sys.argv
if PASSIVE_PEER:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import torch  # noqa: E402 (after the environment it reads while loading)
import torch.nn.functional as F  # noqa: E402

from torch_models import MODELS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The engine's `time` verb trains with this step and momentum; the same here
# keeps the update's arithmetic alike.
LEARNING_RATE = 1e-5
MOMENTUM = 0.9


class EngineError(RuntimeError):
    pass


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--poseidon", type=Path, default=ROOT / "build" / "poseidon",
                   help="engine binary (default: build/poseidon)")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7, help="alternating measurements per side")
    p.add_argument("--seconds", type=float, default=2.0, help="least length of one measurement")
    p.add_argument("--min-iters", type=int, default=3)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: mixed precision on both sides (PyTorch autocast, the engine's --precision bf16)")
    p.add_argument("--json", type=Path, help="also write every measurement here")
    p.add_argument("--compile", action="store_true",
                   help="also time PyTorch with torch.compile (inductor) beside eager PyTorch")
    p.add_argument("--passive-peer", action="store_true",
                   help="PyTorch waits passively too (for cores shared with other work)")
    p.add_argument("--baseline", type=Path,
                   help="a second engine binary (say, before a change), timed in the same rounds; "
                        "a second table gives its ratios")
    return p.parse_args()


class TorchTrainer:
    """One model with synthetic data and its optimizer, ready to step."""

    def __init__(self, name: str, batch: int, precision: str, compiled: bool = False):
        bench = MODELS[name]
        torch.manual_seed(1)
        self.model = bench.build().train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
        if compiled:
            self.model = torch.compile(self.model, backend="inductor")
        self.data = torch.randn(batch, *bench.sample_shape)
        self.label = torch.randint(0, bench.classes, (batch,))
        self.has_accuracy = bench.has_accuracy
        self.precision = precision
        if compiled:
            for _ in range(2):  # the first steps compile forward and backward
                self.step()

    def autocast(self):
        if self.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(self) -> None:
        self.optimizer.zero_grad()
        with self.autocast():
            logits = self.model(self.data)
            loss = F.cross_entropy(logits, self.label)
        if self.has_accuracy:  # the model files compute it too
            with torch.no_grad():
                self.accuracy = (logits.argmax(dim=1) == self.label).float().mean()
        loss.backward()
        self.optimizer.step()

    def iteration_ms(self, seconds: float, min_iters: int, warmup: int) -> float:
        """Mean step time over at least `seconds` and `min_iters` steps."""
        for _ in range(warmup):
            self.step()
        iters = 0
        start = time.perf_counter()
        while iters < min_iters or time.perf_counter() - start < seconds:
            self.step()
            iters += 1
        return (time.perf_counter() - start) * 1000.0 / iters


def run_engine(binary: Path, model: str, batch: int, threads: int, iters: int, warmup: int, precision: str) -> dict:
    bench = MODELS[model]
    cmd = [str(binary), "time", str(ROOT / "models" / bench.model_file), "--batch", str(batch),
           "--iters", str(iters), "--warmup", str(warmup), "--threads", str(threads), "--json"]
    if precision != "fp32":
        cmd += ["--precision", precision]
    for override in bench.overrides:
        cmd += ["--set", override]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise EngineError(reason)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise EngineError(f"output is not JSON ({e})") from e


def torch_source() -> str:
    where = Path(torch.__file__).resolve()
    if str(where).startswith("/usr/lib/python3"):
        return "Debian python3-torch (PyPI fallback)"
    return f"PyPI, venv {sys.prefix}"


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(args: argparse.Namespace) -> dict:
    results = {}
    trainers = {}
    compiled = {}
    batch = {name: MODELS[name].batch or args.batch for name in args.models}
    for name in args.models:
        trainers[name] = TorchTrainer(name, batch[name], args.precision)
        results[name] = {"ours": [], "torch": [], "ours_json": [], "error": None}
        if args.compile:
            log(f"{name}: compiling PyTorch's model (torch.compile, inductor)")
            compiled[name] = TorchTrainer(name, batch[name], args.precision, compiled=True)
            results[name]["torch_compiled"] = []
        try:
            probe = run_engine(args.poseidon, name, batch[name], args.threads, iters=2, warmup=1,
                               precision=args.precision)
            results[name]["fastest_ms"] = probe["iteration_ms"]
        except EngineError as e:
            results[name]["error"] = str(e)
            log(f"{name}: engine failed: {e}")

    engines = {"ours": args.poseidon}
    if args.baseline:
        engines["baseline"] = args.baseline
        for name in args.models:
            results[name].update(baseline=[], baseline_fastest_ms=results[name].get("fastest_ms", 0.0))
    for r in range(args.rounds):
        for name in args.models:
            entry = results[name]
            # Alternate who goes first so neither always runs on a warmer machine.
            sides = list(engines) + ["torch"] + (["torch_compiled"] if args.compile else [])
            if r % 2:
                sides.reverse()
            for side in sides:
                if side in ("torch", "torch_compiled"):
                    trainer = trainers[name] if side == "torch" else compiled[name]
                    ms = trainer.iteration_ms(args.seconds, args.min_iters, warmup=2)
                    entry[side].append(batch[name] * 1000.0 / ms)
                elif entry["error"] is None:
                    fastest = "fastest_ms" if side == "ours" else "baseline_fastest_ms"
                    # The engine takes an iteration count: sized from its fastest run
                    # so far, so that a busy moment does not shorten later runs.
                    iters = max(args.min_iters, math.ceil(args.seconds * 1000.0 / entry[fastest]))
                    try:
                        out = run_engine(engines[side], name, batch[name], args.threads, iters, warmup=2,
                                         precision=args.precision)
                    except EngineError as e:
                        entry["error"] = f"{side}: {e}"
                        log(f"{name}: engine ({side}) failed: {e}")
                        continue
                    entry[fastest] = min(entry[fastest], out["iteration_ms"])
                    entry[side].append(out["images_per_sec"])
                    if side == "ours":
                        entry["ours_json"].append(out)
            ours = f"{entry['ours'][-1]:.1f}" if entry["ours"] else "n/a"
            baseline = f", baseline {entry['baseline'][-1]:.1f} img/s" if entry.get("baseline") else ""
            compiled_text = f", compiled {entry['torch_compiled'][-1]:.1f} img/s" if args.compile else ""
            log(f"round {r + 1}/{args.rounds} {name}: ours {ours} img/s{baseline}, "
                f"PyTorch {entry['torch'][-1]:.1f} img/s{compiled_text}")
    return results


def engine_waits() -> str:
    """The engine's OpenMP wait setting: the environment's, or its own default."""
    chosen = [f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ]
    return ", ".join(chosen) if chosen else "GOMP_SPINCOUNT=3000, its default"


def ratio_range(ours: list, theirs: list) -> str:
    """The median of the per-round ratios ours / theirs, and their range."""
    per_round = [o / t for o, t in zip(ours, theirs)]
    return f"{statistics.median(per_round):.2f} ({min(per_round):.2f} to {max(per_round):.2f})"


def print_table(args: argparse.Namespace, results: dict) -> None:
    print(f"date {datetime.datetime.now(datetime.timezone.utc).date()}, {os.cpu_count()} CPUs ({cpu_model()}), "
          f"torch {torch.__version__} ({torch_source()}), batch {args.batch} unless the table says, "
          f"{args.threads} threads (PyTorch's waits: {'passive, --passive-peer' if PASSIVE_PEER else 'its default'}; "
          f"the engine's: {engine_waits()}), {args.precision}"
          f"{' (PyTorch: autocast bf16)' if args.precision == 'bf16' else ''}, "
          f"fastest of {args.rounds} rounds"
          f"{'; PyTorch compiled: torch.compile, inductor' if args.compile else ''}")
    print()
    compiled_head = " PyTorch compiled img/s | ours / compiled | per-round ratio: median (range) |" if args.compile else ""
    print(f"| model | batch | ours img/s | PyTorch img/s | ours / PyTorch | per-round ratio: median (range) |{compiled_head}")
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if args.compile else ""))
    for name, entry in results.items():
        batch = MODELS[name].batch or args.batch
        theirs = max(entry["torch"])
        compiled = max(entry["torch_compiled"]) if args.compile else 0.0
        if entry["ours"]:
            ours = max(entry["ours"])
            line = f"| {name} | {batch} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f} | " + \
                ratio_range(entry["ours"], entry["torch"]) + " |"
            if args.compile:
                line += f" {compiled:.1f} | {ours / compiled:.2f} | " + ratio_range(entry["ours"], entry["torch_compiled"]) + " |"
            print(line)
        else:
            print(f"| {name} | {batch} | failed: {entry['error']} | {theirs:.1f} | n/a | |" +
                  (f" {compiled:.1f} | n/a | |" if args.compile else ""))
    if args.baseline:
        print()
        print(f"Baseline {args.baseline}, in the same rounds:")
        print()
        print("| model | baseline img/s | baseline / PyTorch | per-round ratio: median (range) | ours / baseline |")
        print("|---|---:|---:|---:|---:|")
        for name, entry in results.items():
            if not entry["baseline"] or not entry["ours"]:
                continue
            theirs, base = max(entry["torch"]), max(entry["baseline"])
            per_round = [b / t for b, t in zip(entry["baseline"], entry["torch"])]
            print(f"| {name} | {base:.1f} | {base / theirs:.2f} | {statistics.median(per_round):.2f} "
                  f"({min(per_round):.2f} to {max(per_round):.2f}) | {max(entry['ours']) / base:.2f} |")


def print_layers(results: dict) -> None:
    measured = {name: e for name, e in results.items() if e["ours"]}
    if not measured:
        return
    slowest = min(measured, key=lambda name: max(measured[name]["ours"]))
    run = max(measured[slowest]["ours_json"], key=lambda out: out["images_per_sec"])
    total = run["iteration_ms"]
    print()
    print(f"Engine per-layer times, {slowest} (the slowest model), its fastest round, batch {run['batch']}, "
          f"{run['threads']} threads, mean of {run['iters']} iterations:")
    print()
    print("| layer | type | forward ms | backward ms | share |")
    print("|---|---|---:|---:|---:|")
    for layer in run["layers"]:
        share = (layer["forward_ms"] + layer["backward_ms"]) / total
        print(f"| {layer['name']} | {layer['type']} | {layer['forward_ms']:.2f} | "
              f"{layer['backward_ms']:.2f} | {share:.1%} |")
    print(f"| (zero gradients) | | | | {run['zero_grads_ms'] / total:.1%} |")
    print(f"| (update) | sgd | | | {run['update_ms'] / total:.1%} |")
    print(f"| total | | {run['forward_ms']:.2f} | {run['backward_ms']:.2f} | "
          f"{total:.2f} ms/iteration |")


def main() -> int:
    args = parse_args()
    if not args.poseidon.is_file():
        log(f"error: engine binary {args.poseidon} not found (build it, or pass --poseidon)")
        return 2
    if args.compile and not hasattr(torch, "compile"):
        log(f"error: --compile needs torch 2.0 or later, this is torch {torch.__version__} ({torch_source()})")
        return 2
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    results = measure(args)
    print_table(args, results)
    print()
    print(f"1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"(other work on the machine makes both sides slower and the ratio noisier)")
    print_layers(results)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "batch": args.batch, "precision": args.precision,
                                         "threads": args.threads, "compile": args.compile, "results": results},
                                        indent=2))
    return 0 if all(e["error"] is None for e in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
