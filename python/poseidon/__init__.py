"""Poseidon from Python: configs, nets, solvers and the CLI's Trainer.

    import poseidon
    config = poseidon.load_config("configs/fashion_mnist_lenet.yaml", ["solver.max_iter=100"])
    trainer = poseidon.Trainer(config, data=batches)   # an iterable of (images, labels)
    trainer.run()
    trainer.net.grad("fc1.weight")                     # a NumPy view of the gradient

Arrays of tensors in host memory are views, not copies; each keeps its
memory alive. See docs/PYTHON.md.
"""
from ._poseidon import *  # noqa: F401,F403
from ._poseidon import __version__  # noqa: F401
