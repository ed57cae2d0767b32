"""The package's API: arrays that view the engine's memory, forward,
backward and a solver step, and config errors that read as the CLI's."""
import gc

import numpy as np
import pytest

import poseidon
from conftest import cli


def lenet(batch=4):
    return poseidon.Net(poseidon.load_model("models/lenet.yaml"), batch=batch, seed=3)


def random_batch(batch, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, batch).astype(np.float32)


def test_parameters_are_views_of_the_net():
    net = lenet()
    weight = net.param("fc1.weight")
    assert weight.shape == (500, 800) and weight.dtype == np.float32
    weight[0, 0] = 5.0
    assert net.param("fc1.weight")[0, 0] == 5.0  # written through, read back from the engine
    assert np.shares_memory(weight, net.params["fc1.weight"])


def test_an_array_keeps_its_memory_after_the_net_is_gone():
    net = lenet()
    bias = net.param("fc2.bias")
    expected = bias.copy()
    del net
    gc.collect()
    lenet()  # allocates again where a freed buffer would have been
    np.testing.assert_array_equal(bias, expected)


def test_forward_backward_and_an_sgd_step():
    config = poseidon.load_config(
        "configs/fashion_mnist_lenet.yaml",
        ["solver.momentum=0", "solver.weight_decay=0", "data.train.batch_size=4", "solver.lr_policy=fixed",
         "solver.warmup_iters=0"])
    net, solver = poseidon.Net(config), poseidon.Solver(config)
    net.feed(*random_batch(4))
    loss = net.forward()
    assert np.isfinite(loss) and loss > 0
    assert net.blob("fc2").shape == (4, 10)
    net.backward()
    grad = net.grad("fc1.weight")
    assert np.abs(grad).max() > 0
    before, grad_then = net.param("fc1.weight").copy(), grad.copy()
    solver.step(net)
    assert solver.iteration == 1
    np.testing.assert_allclose(net.param("fc1.weight"), before - np.float32(solver.lr) * grad_then, rtol=1e-6, atol=1e-9)
    net.feed(*random_batch(4))
    assert net.forward() != loss


def test_a_batch_of_the_wrong_shape_is_refused():
    net = lenet()
    with pytest.raises(poseidon.Error, match=r"an array of shape \[4, 28, 28\] where \[4, 1, 28, 28\] is expected"):
        net.feed(np.zeros((4, 28, 28), np.float32), np.zeros(4, np.float32))


@pytest.mark.parametrize("override", ["solver.lr=fast", "solver.momentun=0.9", "data.train.batch_size=0"])
def test_config_errors_are_the_clis(override):
    with pytest.raises(poseidon.ConfigError) as raised:
        poseidon.load_config("configs/fashion_mnist_lenet.yaml", [override])
    done = cli("summary", "configs/fashion_mnist_lenet.yaml", "--set", override, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: " + str(raised.value)


def short_run(tmp_path, iterations):
    return poseidon.load_config(
        "configs/fashion_mnist_lenet.yaml",
        [f"solver.max_iter={iterations}", "data.train.batch_size=4", "train.display=1", "train.test_iters=1",
         "train.final_checkpoint=false", f"train.output_dir={tmp_path}"])


def test_each_pass_over_a_data_source_is_an_epoch(tmp_path):
    import json

    batches = [random_batch(4, seed) for seed in range(2)]
    poseidon.Trainer(short_run(tmp_path, 5), data=batches, quiet=True).run()
    with open(tmp_path / "metrics.jsonl") as f:
        epochs = [r["epoch"] for r in map(json.loads, f) if r["type"] == "train"]
    assert epochs == [0, 0, 1, 1, 2]


def test_a_spent_iterator_stops_training_naming_the_epoch(tmp_path):
    trainer = poseidon.Trainer(short_run(tmp_path, 3), data=iter([random_batch(4)]), quiet=True)
    with pytest.raises(poseidon.Error, match="data source: epoch 1 yielded no batch"):
        trainer.run()


def test_a_data_source_batch_of_the_wrong_shape_is_named(tmp_path):
    images, labels = random_batch(4)
    trainer = poseidon.Trainer(short_run(tmp_path, 2), data=[(images[:, 0], labels)], quiet=True)
    with pytest.raises(poseidon.Error, match=r"data source, epoch 0 batch 0: images: an array of shape \[4, 28, 28\]"):
        trainer.run()
