"""LeNet on Fashion-MNIST from a NumPy data source, trained by the CLI's Trainer.
python3 train_fashion_mnist.py GRAD.npy [--set overrides...]: trains, then saves fc1's gradient on the first batch."""
import gzip, sys
import numpy as np
import poseidon

def idx(path):  # an IDX file as a NumPy array
    raw = gzip.open(path).read()
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * raw[3]).reshape(np.frombuffer(raw, ">u4", raw[3], 4))

data = "/usr/share/datasets/fashion-mnist/"
images, labels = idx(data + "train-images-idx3-ubyte.gz"), idx(data + "train-labels-idx1-ubyte.gz")
config = poseidon.load_config("configs/fashion_mnist_lenet.yaml", ["data.train.shuffle=false"] + sys.argv[2:])
rank, ranks, B = poseidon.rank(), poseidon.world_size(), config.batch_size
images, labels = images[rank::ranks][: len(images) // ranks], labels[rank::ranks][: len(images) // ranks]
normalize = lambda x: (x[:, None] * np.float32(1 / 255) - np.float32(0.2860)) * (np.float32(1) / np.float32(0.3530))
batches = [(normalize(images[i : i + B]), labels[i : i + B]) for i in range(0, len(labels) - B + 1, B)]
trainer = poseidon.Trainer(config, data=batches)
print("test:", trainer.run())
net = trainer.net
net.feed(*batches[0]), net.forward(), net.backward()
np.save(sys.argv[1], net.grad("fc1.weight"))
