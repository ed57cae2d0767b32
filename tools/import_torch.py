#!/usr/bin/env python3
# A torch.nn model as a poseidon model: tools/torch_graph.py traces it with
# torch.fx and maps it to layers; this script loads the model and writes the
# model YAML and a safetensors file of its parameters under the module's
# state_dict names (the names the layers declare). `poseidon import-torch`
# runs it (both files are built into the binary); it needs Debian's
# python3-torch.
#   tools/import_torch.py MODEL --input 3,224,224 -o model.yaml --weights model.safetensors
# MODEL is package.module:callable or path/file.py:callable (called with no
# arguments, or with --kwargs), or the name of an nn.Module instance there.
import argparse
import importlib
import importlib.util
import json
import os
import re
import sys
import types


def fail(message):
    print("error: " + message, file=sys.stderr)
    sys.exit(2)


torch = torch_graph = None  # imported once the arguments are read: --help and bad arguments need no PyTorch


def import_torch():
    """torch, and tools/torch_graph.py: handed over by the CLI in the environment, else beside this file."""
    global torch, torch_graph
    try:
        import torch
    except ImportError as e:
        fail(f"poseidon import-torch needs PyTorch (Debian: python3-torch): {e}")
    carried = os.environ.pop("POSEIDON_TORCH_GRAPH", None)
    if carried is None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_graph
    else:
        torch_graph = types.ModuleType("torch_graph")
        exec(compile(carried, "tools/torch_graph.py", "exec"), torch_graph.__dict__)
        sys.modules["torch_graph"] = torch_graph


def yaml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", value):
        return json.dumps(value)
    return str(value)


def model_yaml(imp, name, source, input_shape, loss):
    lines = [f"# Imported by poseidon import-torch from {source}.",
             "# Layer names are the modules' paths (functions: the calling module's path",
             "# and the operation), parameter names the module's state_dict keys.",
             f"name: {yaml_value(name)}",
             "inputs: {data: " + yaml_value(input_shape) + (", label: []}" if loss else "}"),
             "layers:"]
    previous = None
    for layer in imp.layers:
        fields = {"name": layer["name"], "type": layer["type"]}
        if layer["inputs"] != [previous]:
            fields["inputs"] = layer["inputs"][0] if len(layer["inputs"]) == 1 else layer["inputs"]
        fields.update(layer["keys"])
        lines.append("  - {" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in fields.items()) + "}")
        previous = layer["name"]
    if loss:
        for base, kind in (("loss", "softmax_loss"), ("accuracy", "accuracy")):
            lines.append(f"  - {{name: {yaml_value(imp.unique(base))}, type: {kind}, "
                         f"inputs: [{yaml_value(imp.output)}, label]}}")
    return "\n".join(lines) + "\n"


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for key, tensor in tensors.items():
        size = tensor.numel() * 4
        header[key] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for tensor in tensors.values():
            f.write(tensor.numpy().astype("<f4", copy=False).tobytes())


def unused_modules(model, written):
    """The outermost modules none of whose parameters and buffers were imported (not called by forward)."""
    found = []
    for path, module in model.named_modules():
        keys = [f"{path}.{k}" if path else k for k in module.state_dict() if not k.endswith("num_batches_tracked")]
        if keys and not any(k in written for k in keys) and not any(path.startswith(p + ".") for p in found):
            found.append(path)
    return found


def load_model(spec, kwargs):
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        fail(f"{spec}: expected package.module:callable or path/file.py:callable")
    try:
        if target.endswith(".py"):
            if not os.path.isfile(target):
                fail(f"{target}: no such file")
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            loaded = importlib.util.spec_from_file_location(os.path.basename(target)[:-3], target)
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(target)
    except ImportError as e:
        fail(f"{spec}: cannot import {target}: {e}")
    if not hasattr(module, attr):
        fail(f"{spec}: {target} has no attribute '{attr}'")
    made = getattr(module, attr)
    if not isinstance(made, torch.nn.Module):
        try:
            made = made(**kwargs)
        except Exception as e:  # the user's constructor: whatever it raises, in one line
            fail(f"{spec}: {type(e).__name__}: {' '.join(str(e).split())}")
    if not isinstance(made, torch.nn.Module):
        fail(f"{spec}: returned {type(made).__name__}, not a torch.nn.Module")
    return made


def main():
    parser = argparse.ArgumentParser(prog="poseidon import-torch", description="A torch.nn model as a poseidon "
                                     "model YAML and a safetensors file of its parameters.")
    parser.add_argument("model", help="package.module:callable or path/file.py:callable, e.g. "
                        "torchvision.models:vgg19 (an nn.Module instance there is taken as it is)")
    parser.add_argument("--input", required=True, help="one example's shape, e.g. 3,224,224")
    parser.add_argument("-o", "--output", required=True, help="model YAML to write")
    parser.add_argument("--weights", required=True, help="safetensors file of the parameters to write")
    parser.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments for the callable")
    parser.add_argument("--state-dict", help="torch.save'd state_dict to load into the model first")
    parser.add_argument("--name", help="the model's name (default: the callable's)")
    parser.add_argument("--no-loss", action="store_true", help="no label input, softmax_loss and accuracy layers "
                        "after a [N, classes] output (never after a softmax)")
    args = parser.parse_args()
    try:
        input_shape = [int(v) for v in args.input.split(",")]
        if not input_shape or min(input_shape) < 1:
            raise ValueError
    except ValueError:
        fail(f"--input {args.input}: expected positive integers separated by commas, e.g. 3,224,224")
    try:
        kwargs = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError
    except ValueError:
        fail(f"--kwargs {args.kwargs}: expected a JSON object, e.g. '{{\"num_classes\": 10}}'")
    import_torch()
    model = load_model(args.model, kwargs)
    if args.state_dict:
        try:
            model.load_state_dict(torch.load(args.state_dict, map_location="cpu"))
        except (OSError, RuntimeError) as e:
            fail(f"{args.state_dict}: {' '.join(str(e).split())}")
    model.eval()
    try:
        imp = torch_graph.Importer(model, input_shape).convert()
    except torch_graph.Refused as e:  # torch.fx's interpreter may append lines of its own
        fail(str(e).splitlines()[0])
    except Exception as e:  # tracing runs the model's own Python: whatever it raises
        message = str(e).strip().splitlines()
        fail(f"{args.model}: torch.fx cannot trace the model's forward ({type(e).__name__}: "
             f"{message[0] if message else ''})")
    loss = not args.no_loss and len(imp.output_shape) == 2 and imp.layers[-1]["type"] != "softmax"
    name = args.name or args.model.rpartition(":")[2]
    for path, text in ((args.output, model_yaml(imp, name, args.model, input_shape, loss)), (args.weights, None)):
        temporary = path + ".partial"
        try:
            if text is None:
                write_safetensors(temporary, imp.state)
            else:
                with open(temporary, "w") as f:
                    f.write(text)
            os.replace(temporary, path)
        except OSError as e:
            fail(f"{path}: {e.strerror}")
    for path in unused_modules(model, imp.state):
        print(f"note: {path} is not called by forward in eval mode; its parameters are left out")
    count = sum(t.numel() for t in imp.state.values())
    print(f"{args.output}: {len(imp.layers) + 2 * loss} layers; {args.weights}: {len(imp.state)} tensors, "
          f"{count:,} values; output blob '{imp.output}' of shape {imp.output_shape[1:]} per example")
    return 0


if __name__ == "__main__":
    sys.exit(main())
