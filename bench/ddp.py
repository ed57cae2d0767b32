"""bench/ddp.sh's bookkeeping: turns one engine run (its metrics.jsonl and
log) into a result line like the PyTorch side's (bench/ddp_torch.py), and
prints the side-by-side table of results.jsonl. Standard library only.

  ddp.py engine-row METRICS LOG MODEL HOSTS RANKS_PER_HOST BATCH WARMUP ITERS STATUS
  ddp.py table RESULTS"""

import json
import re
import sys


def engine_row(metrics: str, log: str, model: str, hosts: str, ranks_per_host: str, batch: str, warmup: str,
               iters: str, status: str) -> dict:
    hosts, ranks_per_host, batch = int(hosts), int(ranks_per_host), int(batch)
    warmup, iters = int(warmup), int(iters)
    row = {"side": "ours", "model": model, "hosts": hosts, "ranks_per_host": ranks_per_host,
           "ranks": hosts * ranks_per_host, "batch": batch, "warmup": warmup, "iterations": iters,
           "status": int(status)}
    try:
        with open(log, errors="replace") as f:
            text = f.read()
        plan = re.search(r"^dist: .*$", text, re.MULTILINE)
        if plan:
            row["plan"] = plan.group(0)
    except OSError:
        pass
    try:
        with open(metrics) as f:
            train = {r["iter"]: r for r in map(json.loads, f) if r.get("type") == "train"}
        first, last = train[warmup], train[warmup + iters]
    except (OSError, KeyError, ValueError) as e:
        row["error"] = f"no timing ({e!r})"
        return row
    seconds = last["elapsed_s"] - first["elapsed_s"]
    row["iteration_s"] = seconds / iters
    row["images_per_sec"] = row["ranks"] * batch * iters / seconds
    # Averages over the records since warm-up (each covers `display` iterations).
    timed = [r for i, r in train.items() if warmup < i <= warmup + iters]
    for key in ("comm_wait_s", "comm_s", "comm_bytes_sent"):
        values = [r[key] for r in timed if key in r]
        if values:
            row[key] = sum(values) / len(values)
    return row


def table(results: str) -> None:
    with open(results) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    keys = []
    by_key = {}
    for r in rows:
        key = (r["model"], r["hosts"], r.get("ranks_per_host", 1))
        if key not in by_key:
            keys.append(key)
            by_key[key] = {}
        # Of several rounds, each side's fastest: other work on the machine only slows a run.
        best = by_key[key].get(r["side"])
        if best is None or r.get("images_per_sec", 0) > best.get("images_per_sec", 0):
            by_key[key][r["side"]] = r

    def rate(r):
        return f"{r['images_per_sec']:.1f}" if r and "images_per_sec" in r else "failed"

    def ms(r, key, brackets=False):
        if not r or r.get(key) is None:
            return ""
        return f"({r[key] * 1e3:.0f})" if brackets else f"{r[key] * 1e3:.0f}"

    def ratio(a, b):
        if a and b and "images_per_sec" in a and "images_per_sec" in b:
            return f"{a['images_per_sec'] / b['images_per_sec']:.2f}"
        return ""

    print("| model | hosts (x ranks each) | batch/rank | ours img/s | DDP img/s | ours / DDP | ours ms/it (comm wait) "
          "| DDP ms/it (without all-reduce) | speed-up over 1 host: ours, DDP |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    def layout(hosts, ranks_per_host):
        return f"{hosts} x {ranks_per_host}" if ranks_per_host > 1 else f"{hosts}"

    for key in keys:
        model, hosts, ranks_per_host = key
        ours, ddp = by_key[key].get("ours"), by_key[key].get("ddp")
        batch = (ours or ddp)["batch"]
        alone = by_key.get((model, 1, 1), {})
        speedup = (f"{ratio(ours, alone.get('ours'))}, {ratio(ddp, alone.get('ddp'))}"
                   if alone and key != (model, 1, 1) else "")
        print(f"| {model} | {layout(hosts, ranks_per_host)} | {batch} | {rate(ours)} | {rate(ddp)} | {ratio(ours, ddp)} "
              f"| {ms(ours, 'iteration_s')} {ms(ours, 'comm_wait_s', True)} "
              f"| {ms(ddp, 'iteration_s')} {ms(ddp, 'compute_only_iteration_s', True)} | {speedup} |")
    plans = [(k, by_key[k]["ours"]["plan"]) for k in keys if "plan" in by_key[k].get("ours", {})]
    if plans:
        print()
        for (model, hosts, ranks_per_host), plan in plans:
            print(f"- {model}, {hosts} host(s) x {ranks_per_host} rank(s): {plan}")


def main() -> int:
    if len(sys.argv) == 11 and sys.argv[1] == "engine-row":
        print(json.dumps(engine_row(*sys.argv[2:])))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
        return 0
    print(__doc__.split("\n\n", 1)[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
