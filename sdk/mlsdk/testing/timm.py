"""timm's model families rebuilt from ``torch.nn`` layers, small, for the ``run_timm``-style
tests (timm itself needs torchvision, which this environment does not carry).

Each follows the layer order and the functional calls of the timm module it names, so that
the trace holds the aten ops timm's would: in-place activations (``inplace=True``), timm's
squeeze-excite (``x.mean((2, 3), keepdim=True)``, 1x1 convolutions, a gate), its
``SelectAdaptivePool2d`` (``avg``, ``max``, ``avgmax``) over ``channels_last`` tensors where
the family uses them, ``LayerNorm2d`` (a permute to channels-last, ``F.layer_norm`` over
channels, a permute back), DropPath (the identity at eval, as timm's ``drop_path``), and the
ViT attention's ``qkv`` reshape/permute/unbind with ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["FAMILIES", "NUM_CLASSES", "PATHS", "ConvNeXt", "DeiT", "EfficientNet", "MobileNetV3",
           "backprop_inputs", "compiled_step", "loss_step", "optimizers", "train_step"]

NUM_CLASSES = 1000


def drop_path(x: torch.Tensor, prob: float, training: bool) -> torch.Tensor:
    """timm's ``drop_path``: the identity at eval or with probability 0, else a per-sample
    Bernoulli mask scaled by ``1 / keep``."""
    if prob == 0.0 or not training:
        return x
    keep = 1 - prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    return x * mask.div_(keep)


class DropPath(nn.Module):
    def __init__(self, prob: float = 0.0):
        super().__init__()
        self.prob = prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.prob, self.training)


class SelectAdaptivePool2d(nn.Module):
    """timm's global pool: ``avg``, ``max`` or ``avgmax`` (their mean), flattened or not."""

    def __init__(self, pool_type: str = "avg", flatten: bool = True):
        super().__init__()
        self.pool_type, self.flatten = pool_type, flatten

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pool_type == "avg":
            x = F.adaptive_avg_pool2d(x, 1)
        elif self.pool_type == "max":
            x = F.adaptive_max_pool2d(x, 1)
        else:
            x = 0.5 * (F.adaptive_avg_pool2d(x, 1) + F.adaptive_max_pool2d(x, 1))
        return x.flatten(1) if self.flatten else x


class SqueezeExcite(nn.Module):
    """timm's ``_efficientnet_blocks.SqueezeExcite``: mean, reduce, act, expand, gate."""

    def __init__(self, channels: int, reduced: int, act: type[nn.Module], gate: nn.Module):
        super().__init__()
        self.conv_reduce = nn.Conv2d(channels, reduced, 1)
        self.act = act(inplace=True)  # type: ignore[call-arg]
        self.conv_expand = nn.Conv2d(reduced, channels, 1)
        self.gate = gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        se = x.mean((2, 3), keepdim=True)
        se = self.conv_expand(self.act(self.conv_reduce(se)))
        return x * self.gate(se)


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
             norm: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                                         bias=not norm)]
    if norm:
        layers.append(nn.BatchNorm2d(cout))
    return layers


class InvertedResidual(nn.Module):
    """timm's ``InvertedResidual`` (MobileNetV3 / EfficientNet MBConv): 1x1 expand, depthwise,
    squeeze-excite, 1x1 project, DropPath and the skip when shapes allow."""

    def __init__(self, cin: int, cout: int, expand: int, k: int, stride: int,
                 act: type[nn.Module], se: SqueezeExcite | None, drop: float = 0.0):
        super().__init__()
        mid = cin * expand
        self.conv_pw = nn.Sequential(*_conv_bn(cin, mid, 1), act(inplace=True))  # type: ignore[call-arg]
        self.conv_dw = nn.Sequential(*_conv_bn(mid, mid, k, stride, groups=mid),
                                     act(inplace=True))  # type: ignore[call-arg]
        self.se = se if se is not None else nn.Identity()
        self.conv_pwl = nn.Sequential(*_conv_bn(mid, cout, 1))
        self.has_skip = stride == 1 and cin == cout
        self.drop_path = DropPath(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.conv_pwl(self.se(self.conv_dw(self.conv_pw(x))))
        return self.drop_path(x) + shortcut if self.has_skip else x


class MobileNetV3(nn.Module):
    """A MobileNetV3 (timm ``mobilenetv3_*``): hardswish stem, a ReLU depthwise-separable
    block, hardswish inverted residuals with hardsigmoid squeeze-excite, timm's head (pool,
    1x1 ``conv_head`` with bias, hardswish, flatten, classifier)."""

    def __init__(self, width: int = 8, num_classes: int = NUM_CLASSES, drop: float = 0.1):
        super().__init__()
        w = width
        self.stem = nn.Sequential(*_conv_bn(3, w, 3, 2), nn.Hardswish(inplace=True))
        self.blocks = nn.Sequential(
            InvertedResidual(w, w, 1, 3, 1, nn.ReLU,
                             SqueezeExcite(w, 4, nn.ReLU, nn.Hardsigmoid(inplace=True)), drop),
            InvertedResidual(w, 2 * w, 3, 3, 2, nn.Hardswish,
                             SqueezeExcite(3 * w, 8, nn.ReLU, nn.Hardsigmoid()), drop),
            InvertedResidual(2 * w, 2 * w, 2, 5, 1, nn.Hardswish,
                             SqueezeExcite(4 * w, 8, nn.ReLU, nn.Hardsigmoid()), drop),
        )
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.conv_head = nn.Conv2d(2 * w, 4 * w, 1)
        self.act2 = nn.Hardswish(inplace=True)
        self.classifier = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = self.act2(self.conv_head(self.global_pool(x)))
        return self.classifier(x.flatten(1))


class EfficientNet(nn.Module):
    """An EfficientNet (timm ``efficientnet_*``): SiLU stem, MBConv blocks with sigmoid
    squeeze-excite (SiLU inside it), ``conv_head`` + BN + SiLU, global pool, classifier."""

    def __init__(self, width: int = 8, num_classes: int = NUM_CLASSES, drop: float = 0.1,
                 pool: str = "avg"):
        super().__init__()
        w = width
        self.conv_stem = nn.Sequential(*_conv_bn(3, w, 3, 2), nn.SiLU(inplace=True))
        self.blocks = nn.Sequential(
            InvertedResidual(w, w, 1, 3, 1, nn.SiLU,
                             SqueezeExcite(w, 2, nn.SiLU, nn.Sigmoid()), drop),
            InvertedResidual(w, 2 * w, 4, 3, 2, nn.SiLU,
                             SqueezeExcite(4 * w, 2, nn.SiLU, nn.Sigmoid()), drop),
            InvertedResidual(2 * w, 2 * w, 4, 5, 1, nn.SiLU,
                             SqueezeExcite(8 * w, 4, nn.SiLU, nn.Sigmoid()), drop),
        )
        self.conv_head = nn.Sequential(*_conv_bn(2 * w, 4 * w, 1), nn.SiLU(inplace=True))
        self.global_pool = SelectAdaptivePool2d(pool)
        self.classifier = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_head(self.blocks(self.conv_stem(x)))
        return self.classifier(self.global_pool(x))


class LayerNorm2d(nn.LayerNorm):
    """timm's ``LayerNorm2d``: LayerNorm over the channels of an NCHW tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    """timm's ``ConvNeXtBlock`` (``conv_mlp=False``): 7x7 depthwise conv, permute to
    channels-last, LayerNorm, MLP (GELU), layer scale ``gamma``, permute back, DropPath, skip."""

    def __init__(self, dim: int, drop: float = 0.0, ls_init: float = 0.5):
        super().__init__()
        self.conv_dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(ls_init * torch.ones(dim))
        self.drop_path = DropPath(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.conv_dw(x).permute(0, 2, 3, 1)
        x = self.fc2(self.act(self.fc1(self.norm(x))))
        x = x.mul(self.gamma).permute(0, 3, 1, 2)
        return self.drop_path(x) + shortcut


class ConvNeXt(nn.Module):
    """A ConvNeXt (timm ``convnext_*``): patchify stem with ``LayerNorm2d``, a stage, a
    downsample (``LayerNorm2d`` + 2x2 stride-2 conv), a stage, timm's ``NormMlpClassifierHead``
    (global pool, ``LayerNorm2d``, flatten, fc). ``pool="avgmax"`` exercises adaptive max pool."""

    def __init__(self, dim: int = 16, num_classes: int = NUM_CLASSES, drop: float = 0.1,
                 pool: str = "avgmax"):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dim, 4, 4), LayerNorm2d(dim, eps=1e-6))
        self.stage1 = nn.Sequential(ConvNeXtBlock(dim, drop), ConvNeXtBlock(dim, drop))
        self.downsample = nn.Sequential(LayerNorm2d(dim, eps=1e-6), nn.Conv2d(dim, 2 * dim, 2, 2))
        self.stage2 = ConvNeXtBlock(2 * dim, drop)
        self.head_pool = SelectAdaptivePool2d(pool, flatten=False)
        self.head_norm = LayerNorm2d(2 * dim, eps=1e-6)
        self.fc = nn.Linear(2 * dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage2(self.downsample(self.stage1(self.stem(x))))
        return self.fc(self.head_norm(self.head_pool(x)).flatten(1))


class Attention(nn.Module):
    """timm's ViT ``Attention`` (fused attention): qkv, reshape/permute/unbind, SDPA, proj."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class ViTBlock(nn.Module):
    """timm's ViT ``Block``: pre-norm attention and MLP (GELU, tanh approximation as in some
    timm configs when ``approximate``), each behind DropPath."""

    def __init__(self, dim: int, heads: int, drop: float, approximate: str = "none"):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU(approximate=approximate)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.drop_path = DropPath(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.fc2(self.act(self.fc1(self.norm2(x)))))


class DeiT(nn.Module):
    """A ViT / DeiT (timm ``vit_*``, ``deit_*_distilled``): conv patch embedding, flatten and
    transpose, class (and with ``distilled`` a distillation) token, learned position
    embedding, encoder blocks, final norm, a head on the class token (DeiT distilled at eval:
    the mean of the two heads)."""

    def __init__(self, image: int = 32, patch: int = 8, dim: int = 32, depth: int = 2,
                 heads: int = 4, num_classes: int = NUM_CLASSES, drop: float = 0.1,
                 distilled: bool = True):
        super().__init__()
        tokens = (image // patch) ** 2 + (2 if distilled else 1)
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.dist_token = nn.Parameter(0.02 * torch.randn(1, 1, dim)) if distilled else None
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, tokens, dim))
        self.blocks = nn.Sequential(*(ViTBlock(dim, heads, drop, ("none", "tanh")[i % 2])
                                      for i in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        self.head_dist = nn.Linear(dim, num_classes) if distilled else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        tokens = [self.cls_token.expand(x.shape[0], -1, -1)]
        if self.dist_token is not None:
            tokens.append(self.dist_token.expand(x.shape[0], -1, -1))
        x = torch.cat([*tokens, x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        if self.head_dist is None:
            return self.head(x[:, 0])
        return (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2


def train_step(model: nn.Module, opt: torch.optim.Optimizer) -> Any:
    """run_timm's training step: zero_grad, cross-entropy of ``images`` and ``labels``,
    backward, step; returns ``{"loss": ...}``."""

    def step(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        opt.zero_grad()
        loss = F.cross_entropy(model(d["images"]), d["labels"])
        loss.backward()
        opt.step()
        return {"loss": loss}

    return step


def optimizers(path: str, context: Any, model: nn.Module,
               reference: nn.Module) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
    """The device step's optimizer over ``model``, registered in ``context`` (an
    :class:`mlsdk.Context`) as ``path`` (one of :data:`PATHS`) does, and the torch optimizer of
    the same settings over ``reference``."""
    from mlsdk import (
        MNCoreAdamW,
        MNCoreSGD,
        set_buffer_name_in_optimizer,
        set_tensor_name_in_module,
    )

    from .training import sgd_with_momentum

    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(PATHS)}, not {path!r}")
    if path == "registry-sgd":
        context.registry.register("model", model)
        return (sgd_with_momentum(model, context, lr=0.1),
                torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9))
    if path == "params-mncoresgd":
        set_tensor_name_in_module(model, "model0")
        for p in model.parameters():
            context.register_param(p)
        sgd = MNCoreSGD(model.parameters(), 0.1, 0.9, 0.0)
        set_buffer_name_in_optimizer(sgd, "optimizer0")
        context.register_optimizer_buffers(sgd)
        return sgd, torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    if path == "backprop":
        context.registry.register("model0", model)
        torch_sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        context.registry.register("optimizer0", torch_sgd)
        return torch_sgd, torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    context.registry.register("model", model)
    adamw = MNCoreAdamW(model.parameters(), lr=2e-3, foreach=False)
    set_buffer_name_in_optimizer(adamw, "opt")
    context.register_optimizer_buffers(adamw)
    return adamw, torch.optim.AdamW(reference.parameters(), lr=2e-3, foreach=False)


PATHS = ("registry-sgd", "params-mncoresgd", "backprop", "adamw")
"""The training paths: the module registered with ``torch.optim.SGD`` (momentum buffers
registered); ``run_timm.py``'s fx2onnx path (``register_param`` per parameter, ``MNCoreSGD``,
BatchNorm statistics left to the kit); ``run_timm.py``'s backprop path (the optimizer
registered by name, ``optimizers=[...]``, ``options={"backprop": True}``, learning rate,
global step and grad scale fed as inputs: :func:`loss_step`, :func:`backprop_inputs`); the
module registered with ``MNCoreAdamW``."""


def loss_step(model: nn.Module) -> Any:
    """The backprop path's function: the forward and the loss only (the compile adds
    backward and the optimizer step)."""

    def step(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"loss": F.cross_entropy(model(d["images"]), d["labels"])}

    return step


def compiled_step(path: str, context: Any, model: nn.Module, opt: torch.optim.Optimizer,
                  sample: dict[str, torch.Tensor], folder: Any) -> Any:
    """The training step of ``path`` compiled in ``context`` into ``folder`` (a storage
    path), as ``step(sample, index) -> {"loss": ...}``: the backprop path feeds its learning
    rate, global step and grad scale, the others take ``sample`` as it is."""
    if path == "backprop":
        compiled = context.compile(loss_step(model), sample, folder,
                                   optimizers=[opt], options={"backprop": True})
        return lambda d, index: compiled(backprop_inputs(d, index))
    compiled = context.compile(train_step(model, opt), sample, folder)
    return lambda d, index: compiled(d)


def backprop_inputs(sample: dict[str, torch.Tensor], global_step: int, lr: float = 0.1,
                    name: str = "optimizer0") -> dict[str, torch.Tensor]:
    """``sample`` with the inputs run_timm's backprop path feeds each step."""
    return {**sample, f"{name}@0@mncore_learning_rate": torch.tensor(lr),
            f"{name}@0@mncore_global_step": torch.tensor(global_step),
            "mncore_grad_scale_factor": torch.tensor(1)}


FAMILIES = {
    "mobilenetv3": MobileNetV3,
    "efficientnet": EfficientNet,
    "convnext": ConvNeXt,
    "deit": DeiT,
}
"""The reproduced families by the name the tests use."""
