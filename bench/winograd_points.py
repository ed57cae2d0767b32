"""Rounding of Winograd F(4x4, 3x3) for a choice of interpolation points,
the reason layers/winograd_tiles.cpp uses 0, +-3/4, +-3/2 (and infinity).

For each set of five finite points it builds A^T and G by Toom-Cook
(G's rows carry 1 / prod(p_j - p_l)), solves for the B^T that makes
A^T [(G g) . (B^T d)] the correlation of d with g, checks that it is exact,
then convolves random tiles summed over channels as the engine does (float32
transforms, products and sums) and prints the norm of the error against a
float64 direct sum, relative to the output, beside the error of a float32
direct sum of the same tiles.

    bench/.venv/bin/python bench/winograd_points.py [--tiles 3000]
"""

import argparse

import numpy as np

M, R = 4, 3
N = M + R - 1
POINT_SETS = [(0, 1, -1, 2, -2), (0, 1, -1, 0.5, -2), (0, 0.75, -0.75, 1.5, -1.5)]


def matrices(points):
    at, g = np.zeros((M, N)), np.zeros((N, R))
    for j, p in enumerate(points):
        scale = np.prod([p - q for q in points if q != p])
        at[:, j] = [p**i for i in range(M)]
        g[j] = [p**k / scale for k in range(R)]
    at[M - 1, N - 1] = g[N - 1, R - 1] = 1.0
    # sum_j at[i, j] g[j, k] bt[j, s] = [s == i + k] for every i, k, s.
    rows, rhs = [], []
    for i in range(M):
        for k in range(R):
            for s in range(N):
                row = np.zeros((N, N))
                row[:, s] = at[i] * g[:, k]
                rows.append(row.ravel())
                rhs.append(float(s == i + k))
    bt = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
    if not np.allclose(np.array(rows) @ bt, rhs):
        raise ValueError(f"no exact B^T for points {points}")
    return at, g, bt.reshape(N, N)


def direct(d, g, dtype):
    y = np.zeros((d.shape[0], M, M), dtype=dtype)
    for a in range(R):
        for b in range(R):
            y += np.einsum("tcij,c->tij", d[:, :, a:a + M, b:b + M].astype(dtype), g[:, a, b].astype(dtype))
    return y


def relative_errors(points, channels, tiles, seed):
    at, gm, bt = (x.astype(np.float32) for x in matrices(points))
    rng = np.random.default_rng(seed)
    d = rng.uniform(-1, 1, (tiles, channels, N, N))
    g = rng.uniform(-1, 1, (channels, R, R))
    exact = direct(d, g, np.float64)
    u = np.einsum("ij,cjk,lk->cil", gm, g.astype(np.float32), gm)
    v = np.einsum("ij,tcjk,lk->tcil", bt, d.astype(np.float32), bt)
    winograd = np.einsum("ij,tjk,lk->til", at, np.einsum("cil,tcil->til", u, v), at)
    norm = np.linalg.norm(exact)
    return np.linalg.norm(winograd - exact) / norm, np.linalg.norm(direct(d, g, np.float32) - exact) / norm


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiles", type=int, default=3000)
    args = p.parse_args()
    print("| points | channels | Winograd error | direct float32 error | ratio |")
    print("|---|---:|---:|---:|---:|")
    for points in POINT_SETS:
        for seed, channels in enumerate([32, 64, 128]):
            w, d = relative_errors(points, channels, args.tiles, seed)
            label = ", ".join(f"{x:g}" for x in points)
            print(f"| {label} | {channels} | {w:.2e} | {d:.2e} | {w / d:.1f} |")


if __name__ == "__main__":
    main()
