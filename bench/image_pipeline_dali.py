"""NVIDIA DALI's CPU pipeline (no GPU: device_id=None) with the transforms of
bench/image_pipeline.sh, run by bench/.venv's Python (nvidia-dali-cuda130,
bench/setup_venv.sh): prints {"images_per_sec": [one rate per epoch]}.

  image_pipeline_dali.py IMAGES THREADS EPOCHS BATCH RESIZE CROP fixed|rrc

fixed: decode, resize of the shorter side to RESIZE, a CROP x CROP crop at a
random place; rrc: decode of a random resized crop's region only
(fn.decoders.image_random_crop, torchvision's scale and ratio ranges), then
resize to CROP x CROP. Both: random mirror, ImageNet mean/std, float CHW.
Bilinear resizes without antialiasing, as the engine's and torchvision's
tensor form. A first epoch warms up and is not counted."""
import json
import sys
import time

from nvidia.dali import fn, pipeline_def, types

images, threads, epochs, batch, resize, crop, augmentation = sys.argv[1:8]
threads, epochs, batch, resize, crop = int(threads), int(epochs), int(batch), int(resize), int(crop)
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1)
def pipeline():
    jpegs, labels = fn.readers.file(file_root=images, random_shuffle=True, name="reader")
    if augmentation == "rrc":
        image = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0],
                                              random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
        image = fn.resize(image, resize_x=crop, resize_y=crop, interp_type=types.INTERP_LINEAR, antialias=False)
        placement = {}
    else:
        image = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        image = fn.resize(image, resize_shorter=resize, interp_type=types.INTERP_LINEAR, antialias=False)
        placement = {"crop": (crop, crop), "crop_pos_x": fn.random.uniform(range=(0.0, 1.0)),
                     "crop_pos_y": fn.random.uniform(range=(0.0, 1.0))}
    image = fn.crop_mirror_normalize(image, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD,
                                     mirror=fn.random.coin_flip(), **placement)
    return image, labels


pipe = pipeline()
pipe.build()
batches = pipe.epoch_size("reader") // batch
rates = []
for epoch in range(epochs + 1):
    start, count = time.perf_counter(), 0
    for _ in range(batches):
        data, _ = pipe.run()
        count += len(data)
    if epoch > 0:
        rates.append(count / (time.perf_counter() - start))
shape = list(data.as_tensor().shape())
if shape != [batch, 3, crop, crop]:
    sys.exit(f"image_pipeline_dali: batches of shape {shape}, expected {[batch, 3, crop, crop]}")
print(json.dumps({"images_per_sec": rates}))
