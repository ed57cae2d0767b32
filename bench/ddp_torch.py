"""The PyTorch side of bench/ddp.sh: one rank of DistributedDataParallel
training (gloo backend) of one of bench/torch_models.py's twins on synthetic
data, so that the engine's distributed training can be set against PyTorch's
on the same emulated cluster, model, per-rank batch and optimizer. Started
once per rank (under tools/cluster's mpirun, whose OMPI_COMM_WORLD_* give
the rank; or with RANK and WORLD_SIZE set); --ranks-per-host only labels
the result (tools/cluster places the ranks). Rank 0 prints one JSON object:
the timed iterations' images per second over all ranks, and the iteration
time of the same steps without DDP's gradient all-reduce (no_sync), which is
what the ranks' computation alone costs on the shared machine."""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from torch_models import MODELS


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True, choices=list(MODELS))
    p.add_argument("--batch", type=int, required=True, help="examples per rank and iteration")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations first")
    p.add_argument("--iters", type=int, default=4, help="timed iterations")
    p.add_argument("--compute-iters", type=int,
                   help="iterations without gradient synchronisation, timed apart "
                        "(default: a quarter of --iters, at least 2; 0: none)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--master-addr", required=True, help="rank 0's address")
    p.add_argument("--master-port", type=int, default=29517)
    p.add_argument("--ranks-per-host", type=int, default=1, help="ranks sharing each host (for the result line)")
    p.add_argument("--ifname", default="eth0", help="network interface gloo uses (the cluster hosts' link)")
    # Compression, against ours (docs/COMPRESSION.md): DDP's fp16 hook, or its
    # PowerSGD hook at --powersgd-rank (error feedback and warm start on, as ours).
    p.add_argument("--comm-hook", choices=["none", "fp16", "powersgd"], default="none")
    p.add_argument("--powersgd-rank", type=int, default=4)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb (its default: 25)")
    return p.parse_args()


def register_hook(model: DistributedDataParallel, args: argparse.Namespace) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if args.comm_hook == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.comm_hook == "powersgd":
        # Compression from the first iteration, as ours; 1-D tensors (biases) stay uncompressed in both.
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                            start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def rank_and_size() -> tuple:
    for rank_key, size_key in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("RANK", "WORLD_SIZE")):
        if rank_key in os.environ:
            return int(os.environ[rank_key]), int(os.environ[size_key])
    raise SystemExit("ddp_torch: no rank given (run under mpirun, or set RANK and WORLD_SIZE)")


def main() -> None:
    args = parse_args()
    if args.compute_iters is None:
        args.compute_iters = max(2, args.iters // 4)
    rank, world = rank_and_size()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", args.ifname)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(minutes=30))

    bench = MODELS[args.model]
    torch.manual_seed(1)
    # DDP copies rank 0's parameters to every rank at construction. The
    # gradients share storage with its buckets (no copy in and out of them),
    # the option its documentation recommends for speed and memory.
    # After its first iteration DDP rebuilds its buckets with a first one of
    # at most 1 MB (dist._DEFAULT_FIRST_BUCKET_BYTES) before the others. With
    # the PowerSGD hook the first gets --bucket-mb too, so that ddp.sh's one
    # bucket is one: two, each with the hook's chain of collectives, stopped
    # gloo with "op.preamble.length <= op.nbytes" at 16 ranks.
    if args.comm_hook == "powersgd":
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_mb * 1024 * 1024)
    model = DistributedDataParallel(bench.build().train(), gradient_as_bucket_view=True, bucket_cap_mb=args.bucket_mb)
    register_hook(model, args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    generator = torch.Generator().manual_seed(1000 + rank)
    data = torch.randn(args.batch, *bench.sample_shape, generator=generator)
    label = torch.randint(0, bench.classes, (args.batch,), generator=generator)

    def step() -> None:
        optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(data), label)
        loss.backward()
        optimizer.step()

    def timed(iterations: int, synchronise: bool) -> float:
        """Seconds the slowest rank took for `iterations` steps, all ranks starting together."""
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iterations):
            if synchronise:
                step()
            else:
                with model.no_sync():
                    step()
        seconds = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        return seconds.item()

    for _ in range(args.warmup):
        step()
    compute_s = timed(args.compute_iters, synchronise=False) / args.compute_iters if args.compute_iters else None
    seconds = timed(args.iters, synchronise=True)
    if rank == 0:
        print(json.dumps({"side": "ddp", "model": args.model, "hosts": world // args.ranks_per_host,
                          "ranks_per_host": args.ranks_per_host, "ranks": world, "batch": args.batch,
                          "threads": args.threads, "warmup": args.warmup, "iterations": args.iters,
                          "iteration_s": seconds / args.iters,
                          "images_per_sec": world * args.batch * args.iters / seconds,
                          "compute_only_iteration_s": compute_s, "torch": torch.__version__,
                          "momentum": args.momentum, "comm_hook": args.comm_hook,
                          "powersgd_rank": args.powersgd_rank if args.comm_hook == "powersgd" else None}),
              flush=True)
    # Every rank is done with the others here. gloo's teardown
    # (destroy_process_group, or the interpreter's exit) sometimes blocks for
    # minutes once a peer has gone, so the process ends without it.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
