#!/usr/bin/env python3
"""Exports torchvision ResNet18 weights as a tensor archive that vidclf's C++ code reads.

vidclf's ResNet18 (model/resnet18.h) uses torchvision's parameter and buffer names, but LibTorch
cannot read a Python state dict with torch::load (that expects TorchScript archives). This script
writes the state dict as a plain dict of name -> tensor with torch.save, which LibTorch's
torch::pickle_load reads (model/resnet18_archive.h: LoadResNet18Archive; vidclf-train
--backbone-archive). It must be a plain dict: LibTorch's unpickler cannot rebuild an OrderedDict
that holds data.

Usage:
  python3 model/scripts/export_resnet18.py --output resnet18.pt --weights resnet18-finetuned.pth
  python3 model/scripts/export_resnet18.py --output resnet18.pt --torchvision-pretrained
  python3 model/scripts/export_resnet18.py --output resnet18.pt --random-seed 3 \\
      --reference-output reference.pt

--weights reads a state dict saved from torchvision.models.resnet18 (or a whole pickled model); an
fc for another number of classes is replaced by a default one, as vidclf never applies fc.
--torchvision-pretrained uses torchvision's ImageNet weights (IMAGENET1K_V1), which torchvision
fetches into its hub cache (~/.cache/torch/hub/checkpoints, or $TORCH_HOME/hub/checkpoints);
without network access, copy resnet18-f37072fd.pth there first.
--random-seed builds reproducible random weights, every layer's batch-norm statistics different,
for tests.
--reference-output also writes {"frames": [2, 3, 64, 64] float, "embeddings": [2, 512] float}:
seeded random frames and torchvision's pooled 512-d features of them in eval mode (the model
without fc), which is what vidclf's ResNet18::forward must reproduce.

Needs torch and torchvision (Debian: apt-get install python3-torchvision).
"""

import argparse
import sys

import torch
import torchvision


def randomise(seed):
    """torchvision's initialisation under `seed`, then random batch-norm affines and statistics.

    Fresh batch norms are all alike (weight 1, bias 0, mean 0, var 1), so a loader that mixed up
    two of them would go unnoticed; random ones make every name matter.
    """
    torch.manual_seed(seed)
    model = torchvision.models.resnet18()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                n = module.num_features
                module.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.5)
                module.bias.copy_(torch.randn(n, generator=generator) * 0.1)
                module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                module.num_batches_tracked.fill_(
                    int(torch.randint(1, 1000, (1,), generator=generator)))
    return model


def load_weights(model, path):
    state = torch.load(path, map_location="cpu")
    if isinstance(state, torch.nn.Module):
        state = state.state_dict()
    if not isinstance(state, dict):
        sys.exit(f"export_resnet18: {path} holds a {type(state).__name__}, not a state dict")
    # vidclf embeds with the pooled features and never applies fc, so a classifier fine-tuned to
    # another number of classes is dropped rather than refused; the archive keeps torchvision's
    # 1000-class fc so that its names and shapes stay torchvision's.
    fc = state.get("fc.weight")
    if fc is not None and tuple(fc.shape) != tuple(model.fc.weight.shape):
        print(f"export_resnet18: dropping {path}'s fc ({tuple(fc.shape)}); vidclf does not use it",
              file=sys.stderr)
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}
        state.update({f"fc.{k}": v for k, v in model.fc.state_dict().items()})
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as error:
        sys.exit(f"export_resnet18: {path} is not a torchvision resnet18 state dict: {error}")
    return model


def pretrained():
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    try:
        return torchvision.models.resnet18(weights=weights)
    except Exception as error:  # torchvision raises URLError, OSError, ... when it cannot fetch
        sys.exit(f"export_resnet18: cannot get torchvision's pretrained weights {weights.url} "
                 f"(not in the torch hub cache, {torch.hub.get_dir()}/checkpoints, and not "
                 f"downloadable here): {error}")


def reference(model, seed):
    """Seeded frames and torchvision's 512-d embeddings of them (eval mode, fc left out)."""
    frames = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(seed))
    fc = model.fc
    model.fc = torch.nn.Identity()
    model.eval()
    with torch.no_grad():
        embeddings = model(frames)
    model.fc = fc
    return {"frames": frames, "embeddings": embeddings}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="archive to write (e.g. resnet18.pt)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--weights", metavar="FILE", help="torchvision resnet18 state dict")
    source.add_argument("--torchvision-pretrained", action="store_true",
                        help="torchvision's ImageNet weights, from the torch hub cache")
    source.add_argument("--random-seed", type=int, metavar="N", help="seeded random weights")
    parser.add_argument("--reference-output", metavar="FILE",
                        help="also write frames and torchvision's embeddings of them")
    args = parser.parse_args()

    if args.weights:
        model = load_weights(torchvision.models.resnet18(), args.weights)
    elif args.torchvision_pretrained:
        model = pretrained()
    else:
        model = randomise(args.random_seed)

    # dict(): LibTorch's unpickler rejects the OrderedDict that state_dict() returns.
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in
             model.state_dict().items()}
    torch.save(state, args.output)
    print(f"wrote {len(state)} tensors to {args.output}")
    if args.reference_output:
        seed = args.random_seed if args.random_seed is not None else 0
        torch.save(reference(model, seed), args.reference_output)
        print(f"wrote reference frames and embeddings to {args.reference_output}")


if __name__ == "__main__":
    main()
