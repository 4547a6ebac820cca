"""Real PyTorch Llama-2 (and GPT-2 XL) blocks on one GPU: the reference for dtsim's per-block
compute model (issue 13, item 9: H100 predictions 35-65% above the PyTorch
blog's FSDP runs).

The blocks are written as HuggingFace's LlamaDecoderLayer runs them in eager
mode: RMSNorm upcast to fp32, q/k/v/o projections, rotary embedding with
rotate_half, SDPA (causal), SiLU(gate)*up, residual adds. Parameters are bf16,
as FSDP's bf16 mixed-precision policy hands them to the forward.

For each configuration it times forward+backward of a stack of 2 and of 4
blocks (CUDA events, after warm-up); the difference over 2 is one block's cost,
free of the embedding, head and loss. With --profile it also records one
iteration of a 2-block stack (7B unless --profile-config) under DDP (world size 1, NCCL) with
torch.profiler, writes the Kineto trace, and sums the GPU kernel time by class
(GEMM, attention, other: elementwise, norms, copies).

  python3 bench/cuda/torch_llama_layers.py --out DIR [--profile] [--device cpu --small]

Prints one JSON object per configuration and writes DIR/torch_llama_layers.json.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

# name: hidden, heads, kv heads, intermediate, activation checkpointing as in the blog's row
CONFIGS = {
    # GPT-2 (HF GPT2Block: LayerNorm, fused qkv, SDPA, gelu_new written out): kv = heads
    "gpt2-xl": (1600, 25, 25, 6400, "none"),
    "llama2-7b": (4096, 32, 32, 11008, "none"),
    "llama2-13b": (5120, 40, 40, 13824, "none"),
    "llama2-70b": (8192, 64, 8, 28672, "full"),
}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, inter):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.input_layernorm = RMSNorm(d)
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)
        self.post_attention_layernorm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, inter, bias=False)
        self.up_proj = nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, -1))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def gelu_new(x):
    # HF's NewGELUActivation, eager: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Gpt2Block(nn.Module):
    def __init__(self, d, heads, inter):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, inter)
        self.mlp_proj = nn.Linear(inter, d)

    def forward(self, x, cos=None, sin=None):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, self.hd).transpose(1, 2) for t in (q, k, v))
        # GPT-2's dropouts (0.1: attention, residual, MLP), as HF trains it
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1 if self.training else 0.0)
        x = x + F.dropout(self.c_proj(a.transpose(1, 2).reshape(b, s, d)), 0.1, self.training)
        return x + F.dropout(self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x)))), 0.1, self.training)


class Stack(nn.Module):
    def __init__(self, layers, d, heads, kv_heads, inter, vocab, ac, gpt2=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList((Gpt2Block(d, heads, inter) if gpt2 else Block(d, heads, kv_heads, inter))
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(d) if gpt2 else RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.ac = ac
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, ids):
        x = self.embed(ids)
        t = torch.arange(ids.shape[1], device=ids.device).float()
        f = torch.outer(t, self.inv_freq)
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos().to(x.dtype)[None, None], emb.sin().to(x.dtype)[None, None]
        for layer in self.layers:
            if self.ac == "full":
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.view(-1))


def step(model, ids):
    # zero_grad(set_to_none=True), as training loops do: backward writes the
    # gradients instead of adding into them.
    model.zero_grad(set_to_none=True)
    model(ids).backward()


def timed(model, ids, iters, warmup, device):
    for _ in range(warmup):
        step(model, ids)
    if device == "cuda":
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            step(model, ids)
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / iters / 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        step(model, ids)
    return (time.perf_counter() - t0) / iters


def kernel_class(name):
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n or "attn" in n:
        return "attention"
    if "gemm" in n or "nvjet" in n or "cutlass" in n or "xmma" in n or "matmul" in n or "sm90_" in n:
        return "gemm"
    if "nccl" in n:
        return "nccl"
    return "other"


def profile(model, ids, out, device, name):
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile as tprofile

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    for _ in range(3):
        step(ddp, ids)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with tprofile(activities=acts, record_shapes=True) as prof:
        step(ddp, ids)
        if device == "cuda":
            torch.cuda.synchronize()
    path = os.path.join(out, f"{name}-2blocks-ddp1.pt.trace.json")
    prof.export_chrome_trace(path)
    by_class, count = {}, {}
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel":
            c = kernel_class(e.get("name", ""))
            by_class[c] = by_class.get(c, 0.0) + e.get("dur", 0) / 1e3
            count[c] = count.get(c, 0) + 1
    dist.destroy_process_group()
    return {"trace": os.path.basename(path), "kernel_ms_by_class": by_class, "kernels_by_class": count}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="tiny shapes, to check the script on a CPU")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-config", default="llama2-7b", help="the configuration --profile records")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=4096)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dev = a.device
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
               "batch": a.batch, "seq": a.seq, "configs": []}
    if dev == "cuda":
        results["cuda"] = torch.version.cuda
        torch.backends.cuda.matmul.allow_tf32 = True
    for name in a.configs.split(","):
        d, heads, kv, inter, ac = CONFIGS[name]
        batch, seq, vocab, iters, warmup = a.batch, a.seq, 32000, 5, 2
        if name.startswith("gpt2"):
            batch, seq, vocab = 4, 1024, 50257
        if a.small:
            d, heads, kv, inter, seq, iters, warmup = 64, 4, 2 if kv != heads else 4, 160, 32, 1, 1
            vocab = 50257 if name.startswith("gpt2") else 100
        times = {}
        for layers in (2, 4):
            torch.manual_seed(0)
            model = Stack(layers, d, heads, kv, inter, vocab, ac, gpt2=name.startswith("gpt2")).to(dev, torch.bfloat16)
            ids = torch.randint(0, vocab, (batch, seq), device=dev)
            times[layers] = timed(model, ids, iters, warmup, dev)
            if name == a.profile_config and layers == 2 and a.profile:
                results["profile"] = profile(model, ids, a.out, dev, name)
            del model
            if dev == "cuda":
                torch.cuda.empty_cache()
        block = (times[4] - times[2]) / 2
        tokens = batch * seq
        # Model FLOPs of one block's forward+backward (3x forward), causal attention counted at half.
        hd = d // heads
        linear = 2 * tokens * (d * heads * hd * 2 + d * kv * hd * 2 + (2 if name.startswith("gpt2") else 3) * d * inter)
        attn = 2 * 2 * batch * heads * seq * seq * hd * 0.5
        flops = 3 * (linear + attn) * (4 / 3 if ac == "full" else 1)
        row = {"config": name, "hidden": d, "heads": heads, "kv_heads": kv, "intermediate": inter,
               "activation_checkpointing": ac, "step_s_2_blocks": times[2], "step_s_4_blocks": times[4],
               "block_s": block, "block_tflops": flops / block / 1e12 if block > 0 else math.nan,
               "rest_s": times[2] - 2 * block}
        print(json.dumps(row), flush=True)
        results["configs"].append(row)
    if "profile" in results:
        print(json.dumps(results["profile"]), flush=True)
    with open(os.path.join(a.out, "torch_llama_layers.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
