# The torch.fx half of `poseidon import-torch` (tools/import_torch.py): traces
# a torch.nn model, records each tensor's shape on one run, and maps every
# module and function call to the poseidon layer that computes the same
# thing, with its keys and its parameters under their state_dict names.
# Whatever no layer reproduces exactly raises Refused, naming where in the
# model it sits.
import operator

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

class Refused(Exception):
    """What the model holds that poseidon cannot compute exactly; the message names where."""


def pair(value):
    """A kernel/stride/pad value as poseidon writes it: one int, or [h, w] where they differ."""
    if isinstance(value, (tuple, list)):
        h, w = (value[0], value[0]) if len(value) == 1 else value
        return h if h == w else [h, w]
    return value


def bind(where, params, args, kwargs):
    """A call's arguments by parameter name; params is [(name, default)], a default of ... is required."""
    names = [p for p, _ in params]
    if len(args) > len(params) or any(k not in names for k in kwargs):
        raise Refused(f"{where}: arguments {list(kwargs)} not understood")
    bound = dict(params)
    bound.update(zip(names, args))
    bound.update(kwargs)
    return bound


# Functions and tensor methods: (parameters, operation name for the layer's name).
_INPUT = [("input", ...)]
FUNCTIONS = {
    F.relu: (_INPUT + [("inplace", False)], "relu"),
    torch.relu: (_INPUT, "relu"),
    torch.sigmoid: (_INPUT, "sigmoid"),
    F.sigmoid: (_INPUT, "sigmoid"),
    torch.tanh: (_INPUT, "tanh"),
    F.tanh: (_INPUT, "tanh"),
    F.gelu: (_INPUT + [("approximate", "none")], "gelu"),
    F.leaky_relu: (_INPUT + [("negative_slope", 0.01), ("inplace", False)], "leaky_relu"),
    F.max_pool2d: (_INPUT + [("kernel_size", ...), ("stride", None), ("padding", 0), ("dilation", 1),
                             ("ceil_mode", False), ("return_indices", False)], "max_pool"),
    F.avg_pool2d: (_INPUT + [("kernel_size", ...), ("stride", None), ("padding", 0), ("ceil_mode", False),
                             ("count_include_pad", True), ("divisor_override", None)], "avg_pool"),
    F.adaptive_avg_pool2d: (_INPUT + [("output_size", ...)], "adaptive_avg_pool"),
    F.dropout: (_INPUT + [("p", 0.5), ("training", True), ("inplace", False)], "dropout"),
    F.softmax: (_INPUT + [("dim", None), ("_stacklevel", 3), ("dtype", None)], "softmax"),
    torch.softmax: (_INPUT + [("dim", ...), ("dtype", None)], "softmax"),
    torch.flatten: (_INPUT + [("start_dim", 0), ("end_dim", -1)], "flatten"),
    torch.cat: ([("tensors", ...), ("dim", 0)], "cat"),
    torch.add: (_INPUT + [("other", ...), ("alpha", 1)], "add"),
    operator.add: (_INPUT + [("other", ...)], "add"),
    operator.iadd: (_INPUT + [("other", ...)], "add"),
    torch.sub: (_INPUT + [("other", ...), ("alpha", 1)], "sub"),
    operator.sub: (_INPUT + [("other", ...)], "sub"),
    torch.mul: (_INPUT + [("other", ...)], "mul"),
    operator.mul: (_INPUT + [("other", ...)], "mul"),
}
METHODS = {
    "relu": (_INPUT, "relu"), "relu_": (_INPUT, "relu"), "sigmoid": (_INPUT, "sigmoid"), "tanh": (_INPUT, "tanh"),
    "flatten": (_INPUT + [("start_dim", 0), ("end_dim", -1)], "flatten"),
    "softmax": (_INPUT + [("dim", ...), ("dtype", None)], "softmax"),
    "add": (_INPUT + [("other", ...), ("alpha", 1)], "add"), "add_": (_INPUT + [("other", ...), ("alpha", 1)], "add"),
    "view": ([("input", ...)], "view"), "reshape": ([("input", ...)], "reshape"), "contiguous": (_INPUT, "contiguous"),
}
# Calls that give shapes, not tensors: allowed where view/reshape read them.
SHAPE_CALLS = {"size", "dim"}
SHAPE_FUNCTIONS = {getattr, operator.getitem}  # x.shape[0]; on a tensor's values they are refused


class ScopedTracer(torch.fx.Tracer):
    """Records in each node the path of the module whose forward made the call (for names and messages)."""

    def __init__(self):
        super().__init__()
        self.scope = [""]

    def call_module(self, m, forward, args, kwargs):
        path = self.path_of_module(m)
        if self.is_leaf_module(m, path) and type(m) not in MODULES:
            raise Refused(f"{path}: {type(m).__module__}.{type(m).__name__} has no poseidon layer type (supported "
                          f"modules: {', '.join(sorted(t.__name__ for t in MODULES))})")
        self.scope.append(path)
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.scope.pop()

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["scope"] = self.scope[-1]
        return node


class ShapeRecorder(torch.fx.Interpreter):
    """Runs the traced graph once and keeps each tensor's shape in its node's meta["shape"]."""

    def __init__(self, module, where):
        super().__init__(module)
        self.where = where

    def run_node(self, node):
        try:
            result = super().run_node(node)
        except Exception as e:  # the model's own code, on an input that may not fit it
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise Refused(f"{self.where(node)}: fails on an input of the --input shape ({first})")
        if isinstance(result, torch.Tensor):
            node.meta["shape"] = list(result.shape)
        return result


class Importer:
    """The model's layers (dicts of name, type, inputs, keys) and state (name -> tensor), after convert()."""

    def __init__(self, model, input_shape, batch=2):
        self.model = model
        self.graph = ScopedTracer().trace(model)
        self.modules = dict(model.named_modules())
        self.module_calls = {}
        for node in self.graph.nodes:
            if node.op == "call_module":
                self.module_calls[node.target] = self.module_calls.get(node.target, 0) + 1
        self.check_kinds()
        gm = torch.fx.GraphModule(model, self.graph)
        with torch.no_grad():
            ShapeRecorder(gm, self.where).run(torch.zeros([batch] + input_shape))
        self.layers, self.blob, self.names, self.state = [], {}, set(), {}

    def where(self, node):
        if node.op == "call_module":
            return node.target
        scope = node.meta.get("scope", "")
        return f"{scope} ({node.name})" if scope else node.name

    def check_kinds(self):
        """Refuses unknown modules and calls before any shape is computed (an LSTM may not run on the input)."""
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != 1:
            raise Refused(f"the model's forward takes {len(placeholders)} inputs; import-torch takes models of one")
        for node in self.graph.nodes:
            if node.op == "call_module":
                module = self.modules[node.target]
                if self.module_calls[node.target] > 1 and any(True for _ in module.parameters()):
                    raise Refused(f"{node.target}: called {self.module_calls[node.target]} times; a poseidon layer "
                                  "owns its parameters, so shared weights cannot be imported")
            elif node.op == "call_function" and node.target not in FUNCTIONS and node.target not in SHAPE_FUNCTIONS:
                raise Refused(f"{self.where(node)}: {getattr(node.target, '__name__', node.target)}() has no poseidon "
                              "layer type")
            elif node.op == "call_method" and node.target not in METHODS and node.target not in SHAPE_CALLS:
                raise Refused(f"{self.where(node)}: Tensor.{node.target}() has no poseidon layer type")
            elif node.op == "get_attr":
                raise Refused(f"{node.target}: a tensor used directly by forward; only layer modules may hold "
                              "parameters")

    def shape(self, node):
        return node.meta.get("shape") if isinstance(node, torch.fx.Node) else None

    def tensor_input(self, where, value):
        if not isinstance(value, torch.fx.Node) or self.shape(value) is None:
            raise Refused(f"{where}: takes the constant {value!r} where poseidon layers take a tensor")
        return self.blob[value]

    def name_for(self, node, op):
        """The module's path for a module, else the calling module's path and the operation."""
        if node.op == "call_module":
            base = node.target
        else:
            scope = node.meta.get("scope", "")
            base = f"{scope}.{op}" if scope else op
        return self.unique(base)

    def unique(self, base):
        name, k = base, 0
        while name in self.names or name in ("data", "label"):
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def add_layer(self, node, op, kind, inputs, keys=None, params=()):
        name = self.name_for(node, op)
        self.layers.append({"name": name, "type": kind, "inputs": inputs, "keys": keys or {}})
        for key, tensor in params:
            self.state[f"{name}.{key}"] = tensor.detach().to(torch.float32).contiguous()
        self.blob[node] = name

    def check_in_place(self, node, in_place):
        if not in_place:
            return
        source = node.args[0]
        order = {n: i for i, n in enumerate(self.graph.nodes)}
        if any(order[user] > order[node] for user in source.users if user is not node):
            raise Refused(f"{self.where(node)}: works in place on a value that is read again later")

    def convert(self):
        for node in self.graph.nodes:
            if node.op == "placeholder":
                self.blob[node] = "data"
            elif node.op == "call_module":
                module = self.modules[node.target]
                self.check_in_place(node, getattr(module, "inplace", False))
                MODULES[type(module)](self, node, module)
            elif node.op == "call_function" and node.target in SHAPE_FUNCTIONS:
                if self.shape(node) is not None:
                    raise Refused(f"{self.where(node)}: {node.target.__name__}() that makes a tensor (slicing) has "
                                  "no poseidon layer type")
            elif node.op == "call_function":
                params, op = FUNCTIONS[node.target]
                args = bind(self.where(node), params, node.args, node.kwargs)
                self.check_in_place(node, node.target is operator.iadd or args.get("inplace", False))
                convert_call(self, node, op, args)
            elif node.op == "call_method" and node.target not in SHAPE_CALLS:
                params, op = METHODS[node.target]
                args = bind(self.where(node), params, node.args[:1] if op in ("view", "reshape") else node.args,
                            node.kwargs)
                self.check_in_place(node, node.target.endswith("_"))
                convert_call(self, node, op, args)
            elif node.op == "output":
                result = node.args[0]
                if not isinstance(result, torch.fx.Node) or self.shape(result) is None:
                    raise Refused("the model returns several values; import-torch takes models with one output")
                self.output, self.output_shape = self.blob[result], self.shape(result)
        return self


def needs_2d_input(where, shape):
    if shape is None or len(shape) != 4:
        raise Refused(f"{where}: poseidon pools and convolves NCHW input, this input has shape {shape}")


def conv(imp, node, m):
    needs_2d_input(node.target, imp.shape(node.args[0]))
    if m.padding_mode != "zeros":
        raise Refused(f"{node.target}: padding_mode '{m.padding_mode}'; poseidon's conv pads with zeros only")
    padding = m.padding
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif any((d * (k - 1)) % 2 for d, k in zip(m.dilation, m.kernel_size)):
            raise Refused(f"{node.target}: padding 'same' with an even kernel pads one side more; poseidon pads "
                          "both sides alike")
        else:
            padding = tuple(d * (k - 1) // 2 for d, k in zip(m.dilation, m.kernel_size))
    keys = {"num_output": m.out_channels, "kernel_size": pair(m.kernel_size)}
    for key, value, default in (("stride", m.stride, 1), ("pad", padding, 0), ("dilation", m.dilation, 1)):
        if pair(value) != default:
            keys[key] = pair(value)
    if m.groups != 1:
        keys["groups"] = m.groups
    params = [("weight", m.weight)]
    if m.bias is None:
        keys["bias"] = False
    else:
        params.append(("bias", m.bias))
    imp.add_layer(node, "conv", "conv", [imp.blob[node.args[0]]], keys, params)


def linear(imp, node, m):
    shape = imp.shape(node.args[0])
    if shape is None or len(shape) != 2:
        raise Refused(f"{node.target}: Linear on input of shape {shape}; poseidon's fc multiplies [N, features] "
                      "(flatten first)")
    keys = {"num_output": m.out_features}
    params = [("weight", m.weight)]
    if m.bias is None:
        keys["bias"] = False
    else:
        params.append(("bias", m.bias))
    imp.add_layer(node, "fc", "fc", [imp.blob[node.args[0]]], keys, params)


def batch_norm(imp, node, m):
    if not m.track_running_stats:
        raise Refused(f"{node.target}: track_running_stats=False normalises with the batch's statistics in eval "
                      "mode; poseidon's batch_norm uses running statistics")
    if m.momentum is None:
        raise Refused(f"{node.target}: momentum=None (a cumulative average); poseidon's batch_norm takes a number")
    keys = {}
    if m.eps != 1e-5:
        keys["eps"] = m.eps
    if m.momentum != 0.1:
        keys["momentum"] = m.momentum
    params = [("running_mean", m.running_mean), ("running_var", m.running_var)]
    if m.affine:
        params = [("weight", m.weight), ("bias", m.bias)] + params
    else:
        keys["affine"] = False
    imp.add_layer(node, "batch_norm", "batch_norm", [imp.blob[node.args[0]]], keys, params)


def max_pool(imp, where, node, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    if pair(dilation) != 1 or return_indices:
        raise Refused(f"{where}: max pooling with dilation or return_indices; poseidon's pool has neither")
    pool(imp, node, "max_pool", {}, kernel_size, stride, padding, ceil_mode)


def avg_pool(imp, where, node, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if divisor_override is not None:
        raise Refused(f"{where}: divisor_override; poseidon's pool divides by the window")
    pool(imp, node, "avg_pool", {"mode": "avg"} if count_include_pad else {"mode": "avg", "count_include_pad": False},
         kernel_size, stride, padding, ceil_mode)


def pool(imp, node, op, keys, kernel_size, stride, padding, ceil_mode):
    needs_2d_input(imp.where(node), imp.shape(node.args[0]))
    keys["kernel_size"] = pair(kernel_size)
    if stride not in (None, []) and pair(stride) != keys["kernel_size"]:
        keys["stride"] = pair(stride)
    if pair(padding) != 0:
        keys["pad"] = pair(padding)
    if ceil_mode:
        keys["ceil_mode"] = True
    imp.add_layer(node, op, "pool", [imp.blob[node.args[0]]], keys)


def adaptive_avg_pool(imp, node, output_size):
    shape = imp.shape(node.args[0])
    needs_2d_input(imp.where(node), shape)
    size = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size, output_size]
    size = [shape[2 + i] if s is None else s for i, s in enumerate(size)]
    if size == [1, 1]:
        imp.add_layer(node, "avgpool", "pool", [imp.blob[node.args[0]]], {"mode": "avg", "global": True})
    else:
        imp.add_layer(node, "adaptive_avg_pool", "adaptive_avg_pool", [imp.blob[node.args[0]]],
                      {"output_size": pair(size)})


def flatten(imp, node, start, end):
    shape = imp.shape(node.args[0])
    rank = len(shape)
    start, end = start % rank, end % rank
    if start == 0 or end != rank - 1:
        raise Refused(f"{imp.where(node)}: flattens dimensions {start}..{end} of {shape}; poseidon's flatten keeps "
                      "the batch dimension and merges from an axis to the end")
    imp.add_layer(node, "flatten", "flatten", [imp.blob[node.args[0]]], {"axis": start} if start != 1 else {})


def reshape(imp, node):
    shape, out = imp.shape(node.args[0]), imp.shape(node)
    if out == shape:
        imp.blob[node] = imp.blob[node.args[0]]
        return
    for axis in range(1, len(shape)):
        if out == shape[:axis] + [int(torch.tensor(shape[axis:]).prod())]:
            return flatten(imp, node, axis, -1)
    raise Refused(f"{imp.where(node)}: reshapes {shape} to {out}; poseidon reshapes only by flattening trailing "
                  "dimensions")


def alias(imp, node):
    imp.blob[node] = imp.blob[node.args[0]]


def combine(imp, node, op, a, b, alpha=1):
    where = imp.where(node)
    inputs = [imp.tensor_input(where, a), imp.tensor_input(where, b)]
    if imp.shape(a) != imp.shape(b):
        raise Refused(f"{where}: {op} of shapes {imp.shape(a)} and {imp.shape(b)}; poseidon's layers combine equal "
                      "shapes only (no broadcasting)")
    if op == "mul":
        imp.add_layer(node, op, "eltwise", inputs, {"operation": "prod"})
        return
    coefficients = [1, -alpha if op == "sub" else alpha]
    imp.add_layer(node, op, "sum", inputs, {"coefficients": coefficients} if coefficients != [1, 1] else {})


def softmax(imp, node, dim):
    if dim is None or dim % len(imp.shape(node)) == 0:
        raise Refused(f"{imp.where(node)}: softmax over dim {dim}; poseidon normalises within each example")
    imp.add_layer(node, "softmax", "softmax", [imp.blob[node.args[0]]], {"axis": dim} if dim != 1 else {})


def convert_call(imp, node, op, a):
    """A function or method call, its arguments bound by name in `a`."""
    where, unary = imp.where(node), lambda kind, keys=None: imp.add_layer(
        node, op, kind, [imp.tensor_input(where, a["input"])], keys)
    if op in ("relu", "sigmoid", "tanh"):
        unary(op)
    elif op == "gelu":
        unary("gelu", {"approximate": "tanh"} if a["approximate"] == "tanh" else {})
    elif op == "leaky_relu":
        unary("leaky_relu", {"negative_slope": a["negative_slope"]})
    elif op == "dropout":
        unary("dropout", {"ratio": a["p"]})
    elif op == "max_pool":
        max_pool(imp, where, node, a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"],
                 a["return_indices"])
    elif op == "avg_pool":
        avg_pool(imp, where, node, a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"],
                 a["count_include_pad"], a["divisor_override"])
    elif op == "adaptive_avg_pool":
        adaptive_avg_pool(imp, node, a["output_size"])
    elif op == "softmax":
        softmax(imp, node, a["dim"])
    elif op == "flatten":
        flatten(imp, node, a["start_dim"], a["end_dim"])
    elif op in ("view", "reshape"):
        reshape(imp, node)
    elif op == "contiguous":
        alias(imp, node)
    elif op == "cat":
        inputs = [imp.tensor_input(where, t) for t in a["tensors"]]
        if a["dim"] % len(imp.shape(node)) == 0:
            raise Refused(f"{where}: concatenates along the batch dimension; poseidon's concat joins within examples")
        imp.add_layer(node, "concat", "concat", inputs, {"axis": a["dim"]} if a["dim"] != 1 else {})
    else:
        combine(imp, node, op, a["input"], a["other"], a.get("alpha", 1))


MODULES = {
    nn.Conv2d: conv,
    nn.Linear: linear,
    nn.BatchNorm1d: batch_norm,
    nn.BatchNorm2d: batch_norm,
    nn.ReLU: lambda imp, n, m: imp.add_layer(n, "relu", "relu", [imp.blob[n.args[0]]]),
    nn.Sigmoid: lambda imp, n, m: imp.add_layer(n, "sigmoid", "sigmoid", [imp.blob[n.args[0]]]),
    nn.Tanh: lambda imp, n, m: imp.add_layer(n, "tanh", "tanh", [imp.blob[n.args[0]]]),
    nn.GELU: lambda imp, n, m: imp.add_layer(n, "gelu", "gelu", [imp.blob[n.args[0]]],
                                             {"approximate": "tanh"} if m.approximate == "tanh" else {}),
    nn.LeakyReLU: lambda imp, n, m: imp.add_layer(n, "leaky_relu", "leaky_relu", [imp.blob[n.args[0]]],
                                                  {"negative_slope": m.negative_slope}),
    nn.PReLU: lambda imp, n, m: imp.add_layer(n, "prelu", "prelu", [imp.blob[n.args[0]]],
                                              {"channel_shared": True} if m.num_parameters == 1 else {},
                                              [("weight", m.weight)]),
    nn.LocalResponseNorm: lambda imp, n, m: imp.add_layer(
        n, "lrn", "lrn", [imp.blob[n.args[0]]], {"local_size": m.size, "alpha": m.alpha, "beta": m.beta, "k": m.k}),
    nn.MaxPool2d: lambda imp, n, m: max_pool(imp, n.target, n, m.kernel_size, m.stride, m.padding, m.dilation,
                                             m.ceil_mode, m.return_indices),
    nn.AvgPool2d: lambda imp, n, m: avg_pool(imp, n.target, n, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                                             m.count_include_pad, m.divisor_override),
    nn.AdaptiveAvgPool2d: lambda imp, n, m: adaptive_avg_pool(imp, n, m.output_size),
    nn.Dropout: lambda imp, n, m: imp.add_layer(n, "dropout", "dropout", [imp.blob[n.args[0]]], {"ratio": m.p}),
    nn.Flatten: lambda imp, n, m: flatten(imp, n, m.start_dim, m.end_dim),
    nn.Softmax: lambda imp, n, m: softmax(imp, n, m.dim),
    nn.Identity: lambda imp, n, m: alias(imp, n),
}
