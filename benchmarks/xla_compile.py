"""CPU time of planning a GPT with shardplan against XLA compiling the same sharded GPT (issue 11).

The model is the ``gpt`` builder at hidden 1024, 16 heads, seq 1024, batch 8, vocab 50257 on a
2x4 mesh (dp=2, tp=4) with Megatron annotations: tokens and labels split over dp on the batch,
``w{q,k,v}`` and ``mlp.w1`` column-parallel over tp, ``attn.wo`` and ``mlp.w2`` row-parallel.
For each depth it measures, in fresh processes, the CPU seconds (user + sys, from
``getrusage(RUSAGE_CHILDREN)`` deltas) of

- ``shardplan plan MODEL.yaml --search S`` and ``shardplan plan MODEL.yaml --search S --training``
  for each search ``S`` of ``--search`` (default: the default search, ``auto``);
- a child that builds the same model in JAX (:func:`gpt_jax`) and compiles it with
  ``jax.jit(..., in_shardings=..., out_shardings=...).lower(*ShapeDtypeStructs).compile()`` on 8
  host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``) -- the forward (the loss)
  and the training step (``jax.value_and_grad`` of the loss over every parameter). Reported are
  the whole child's CPU time and, separately, ``time.process_time()`` around lower + compile
  inside the child (all threads of the process).

Medians of --repeat, then ``shardplan / XLA`` per depth, mode and search (whole process against whole
process; the column before it is shardplan against the compile call alone), with the objective of
each search's plan. Before timing, a
child checks at a small size (2 layers, hidden 64, seq 16, vocab 97) that the JAX function, run
sharded on the 8 devices in float64, gives the loss and every parameter gradient of shardplan's
numpy reference (``run_reference`` / ``reference_gradients``) of the very YAML that is planned,
and that the JAX in_shardings are the YAML's shardings. Without jax, only the shardplan columns.

    python benchmarks/xla_compile.py [--layers 12 24 48] [--repeat 3] [--no-check] [--search auto bfs ilp]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

MODEL = """
name: gpt_l{layers}
mesh: {{dp: 2, tp: 4}}
model: {{builder: gpt, layers: {layers}, hidden: {hidden}, heads: {heads}, seq: {seq}, batch: {batch}, vocab: {vocab}}}
shardings:
  tokens: '[{{"dp"}}, {{}}]'
  labels: '[{{"dp"}}, {{}}]'
  "layer*.attn.w[qkv]": '[{{}}, {{"tp"}}]'
  "layer*.attn.wo": '[{{"tp"}}, {{}}]'
  "layer*.mlp.w1": '[{{}}, {{"tp"}}]'
  "layer*.mlp.w2": '[{{"tp"}}, {{}}]'
"""

SIZES = {"hidden": 1024, "heads": 16, "seq": 1024, "batch": 8, "vocab": 50257}
CHECK_SIZES = {"layers": 2, "hidden": 64, "heads": 4, "seq": 16, "batch": 8, "vocab": 97}
MESH = (("dp", 2), ("tp", 4))
XLA_FLAG = "--xla_force_host_platform_device_count=8"
LN_EPS = 1e-5  # the layernorm op's default eps, which the builder uses


def gpt_jax(*, layers: int, hidden: int, heads: int, seq: int, batch: int, vocab: int, dtype=None):
    """The ``gpt`` builder's model in JAX: ``(param_shapes, param_specs, data_specs, loss)``.

    ``param_shapes`` maps the builder's parameter names to shapes; ``param_specs`` and
    ``data_specs`` (tokens, labels) map names to ``PartitionSpec`` over ("dp", "tp"), mirroring
    MODEL's ``shardings:`` (unannotated parameters are replicated, jit's meaning of a fixed input
    layout); ``loss(params, tokens, labels)`` is the scalar mean cross-entropy, op for op as
    graphs/builders/gpt_model.py and transformer_model.py build it.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    ffn, hd = 4 * hidden, hidden // heads
    dtype = dtype or jnp.float32
    shapes = {"embed.table": (vocab, hidden), "embed.pos": (seq, hidden),
              "final.ln.scale": (hidden,), "final.ln.bias": (hidden,), "lm_head.w": (hidden, vocab)}
    specs = {name: P() for name in shapes}
    for i in range(layers):
        p = f"layer{i}"
        for n in ("attn.ln", "mlp.ln"):
            shapes[f"{p}.{n}.scale"] = shapes[f"{p}.{n}.bias"] = (hidden,)
            specs[f"{p}.{n}.scale"] = specs[f"{p}.{n}.bias"] = P()
        for n in ("wq", "wk", "wv"):
            shapes[f"{p}.attn.{n}"], specs[f"{p}.attn.{n}"] = (hidden, hidden), P(None, "tp")  # column-parallel
        shapes[f"{p}.attn.wo"], specs[f"{p}.attn.wo"] = (hidden, hidden), P("tp", None)       # row-parallel
        shapes[f"{p}.mlp.w1"], specs[f"{p}.mlp.w1"] = (hidden, ffn), P(None, "tp")            # column-parallel
        shapes[f"{p}.mlp.w2"], specs[f"{p}.mlp.w2"] = (ffn, hidden), P("tp", None)            # row-parallel
    data_specs = {"tokens": P("dp", None), "labels": P("dp", None)}
    inv_sqrt_d = 1.0 / math.sqrt(hd)  # the builder's const attn.inv_sqrt_d

    def layernorm(x, scale, bias):  # op layernorm: biased variance over the last axis, eps 1e-5
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + LN_EPS) * scale + bias

    def attention(w, p, x):
        h = layernorm(x, w[f"{p}.ln.scale"], w[f"{p}.ln.bias"])                       # {p}.ln
        t = {}
        for n in "qkv":
            y = jnp.matmul(h, w[f"{p}.w{n}"])                                          # {p}.{n}_proj
            y = jnp.reshape(y, (batch, seq, heads, hd))                                # {p}.{n}_split
            t[n] = jnp.transpose(y, (0, 2, 1, 3))                                      # {p}.{n}_transpose
        s = jnp.einsum("bnqd,bnkd->bnqk", t["q"], t["k"])                              # {p}.qk
        s = s * jnp.asarray(inv_sqrt_d, s.dtype)                                       # {p}.scale
        a = jax.nn.softmax(s, axis=-1)                                                 # {p}.softmax
        o = jnp.einsum("bnqk,bnkd->bnqd", a, t["v"])                                   # {p}.pv
        o = jnp.transpose(o, (0, 2, 1, 3))                                             # {p}.ctx_transpose
        o = jnp.reshape(o, (batch, seq, hidden))                                       # {p}.ctx_merge
        o = jnp.matmul(o, w[f"{p}.wo"])                                                # {p}.o_proj
        return x + o                                                                   # {p}.residual

    def mlp(w, p, x):
        h = layernorm(x, w[f"{p}.ln.scale"], w[f"{p}.ln.bias"])                       # {p}.ln
        h = jnp.matmul(h, w[f"{p}.w1"])                                                # {p}.up
        h = jax.nn.gelu(h, approximate=True)                                           # {p}.gelu (tanh)
        h = jnp.matmul(h, w[f"{p}.w2"])                                                # {p}.down
        return x + h                                                                   # {p}.residual

    def loss(w, tokens, labels):
        h = jnp.take(w["embed.table"], tokens, axis=0)                                 # embed.lookup
        h = h + w["embed.pos"]                                                         # embed.add_pos
        for i in range(layers):
            h = mlp(w, f"layer{i}.mlp", attention(w, f"layer{i}.attn", h))
        h = layernorm(h, w["final.ln.scale"], w["final.ln.bias"])                      # final.ln
        logits = jnp.matmul(h, w["lm_head.w"])                                         # lm_head.matmul (untied)
        picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)                    # loss.cross_entropy

    return {k: shapes[k] for k in specs}, specs, data_specs, loss


def _jit(mode: str, sizes: dict, dtype=None):
    """``(jitted, abstract_args, mesh)`` for ``mode`` (forward: the loss; training: value_and_grad)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    dtype = dtype or jnp.float32
    devices = jax.devices()
    if len(devices) < 8:
        raise SystemExit(f"need 8 host devices, jax sees {len(devices)} (is XLA_FLAGS={XLA_FLAG} set?)")
    mesh = Mesh(np.array(devices[:8]).reshape([n for _, n in MESH]), tuple(a for a, _ in MESH))
    shapes, specs, data_specs, loss = gpt_jax(**sizes, dtype=dtype)
    named = {k: NamedSharding(mesh, s) for k, s in specs.items()}
    data = {k: NamedSharding(mesh, s) for k, s in data_specs.items()}
    scalar = NamedSharding(mesh, P())
    fn = loss if mode == "forward" else jax.value_and_grad(loss)
    out = scalar if mode == "forward" else (scalar, named)
    jitted = jax.jit(fn, in_shardings=(named, data["tokens"], data["labels"]), out_shardings=out)
    tok = jax.ShapeDtypeStruct((sizes["batch"], sizes["seq"]), jnp.int32)
    args = ({k: jax.ShapeDtypeStruct(s, dtype) for k, s in shapes.items()}, tok, tok)
    return jitted, args, mesh


def xla_child(args) -> None:
    """Lower and compile one mode at full size; prints the CPU seconds of lower + compile as JSON."""
    import time

    import jax  # noqa: F401  (imported before the clock starts: only lower + compile are timed)

    sizes = dict(SIZES, layers=args.layer)
    jitted, abstract, _ = _jit(args.mode, sizes)
    t0 = time.process_time()
    lowered = jitted.lower(*abstract)
    t1 = time.process_time()
    lowered.compile()
    t2 = time.process_time()
    print(json.dumps({"lower_s": t1 - t0, "compile_s": t2 - t1, "lower_compile_s": t2 - t0}))


def check_child() -> None:
    """The JAX model against shardplan's reference of MODEL at CHECK_SIZES (float64, sharded)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    from graphs import load_model_text
    from graphs.evaluate import example_inputs, run_reference
    from graphs.gradients import reference_gradients

    g = load_model_text(MODEL.format(**CHECK_SIZES))
    feeds = example_inputs(g, seed=0)
    ref_loss = run_reference(g, feeds)["loss"]
    _, ref_grads = reference_gradients(g, feeds)
    shapes, specs, data_specs, _ = gpt_jax(**CHECK_SIZES, dtype=jnp.float64)
    params = {t.name: t.shape for t in g.tensors.values() if t.kind == "param"}
    assert params == {k: tuple(v) for k, v in shapes.items()}, "parameter names or shapes differ"
    assert set(ref_grads) == set(shapes), "gradient sets differ"
    for name, spec in {**specs, **data_specs}.items():  # the YAML's shardings, dim by dim
        s = g.tensor(name).sharding
        rank = len(g.tensor(name).shape)
        yaml_dims = [tuple(a.name for a in d.axes) for d in s.dims] if s is not None else [()] * rank
        jax_dims = [() if e is None else ((e,) if isinstance(e, str) else tuple(e)) for e in spec]
        jax_dims += [()] * (len(yaml_dims) - len(jax_dims))
        assert yaml_dims == jax_dims, f"{name}: YAML {yaml_dims} vs JAX {jax_dims}"
    for mode in ("forward", "training"):
        jitted, _, _ = _jit(mode, CHECK_SIZES, dtype=jnp.float64)
        out = jitted({k: jnp.asarray(feeds[k]) for k in shapes}, jnp.asarray(feeds["tokens"]),
                     jnp.asarray(feeds["labels"]))
        loss = out if mode == "forward" else out[0]
        assert np.allclose(loss, ref_loss, rtol=1e-10, atol=0), f"{mode} loss {loss} vs reference {ref_loss}"
        if mode == "training":
            worst = max(float(np.max(np.abs(out[1][k] - ref_grads[k])) / (np.max(np.abs(ref_grads[k])) + 1e-300))
                        for k in shapes)
            assert worst < 1e-9, f"gradients differ: worst relative error {worst:.3g}"
    print(json.dumps({"ok": True, "loss": float(ref_loss), "params": len(shapes), "worst_grad_rel": worst}))


def cpu_run(cmd: list[str], env: dict | None = None) -> tuple[float, str]:
    """Run ``cmd`` to completion; ``(user + sys CPU seconds of it and its children, stdout)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), r.stdout


def jax_env() -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + XLA_FLAG).strip()
    return env


def have_jax() -> bool:
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-check", action="store_true", help="skip the small-size JAX-vs-reference check")
    parser.add_argument("--search", nargs="+", default=["auto"], metavar="S",
                        help="the searches to time (default: auto, the default search)")
    parser.add_argument("--xla-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="forward", help=argparse.SUPPRESS)
    parser.add_argument("--layer", type=int, default=12, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.xla_child:
        return xla_child(args)
    if args.check_child:
        return check_child()

    shardplan = shutil.which("shardplan")
    sp_cmd = [shardplan] if shardplan else [sys.executable, "-m", "planner.cli"]
    jax_ok = have_jax()
    if not jax_ok:
        print("jax is not importable (pip install 'jax[cpu]'): XLA columns skipped, shardplan only.")
    elif not args.no_check:
        _, out = cpu_run([sys.executable, __file__, "--check-child"], env=jax_env())
        r = json.loads(out.strip().splitlines()[-1])
        print(f"check: JAX model == shardplan reference at {CHECK_SIZES} (float64, sharded on 8 devices): "
              f"loss {r['loss']:.6f}, {r['params']} parameter gradients, worst relative error "
              f"{r['worst_grad_rel']:.1e}")
    print(f"gpt hidden {SIZES['hidden']}, {SIZES['heads']} heads, seq {SIZES['seq']}, batch {SIZES['batch']}, "
          f"vocab {SIZES['vocab']}, mesh dp=2 x tp=4, Megatron annotations; CPU seconds (user+sys), "
          f"median of {args.repeat}")
    head = f"{'layers':>6}  {'mode':>8}  {'search':>6}  {'shardplan':>9}  {'objective s':>11}"
    if jax_ok:
        head += f"  {'XLA process':>11}  {'XLA lower+compile':>17}  {'sp / compile':>12}  {'shardplan / XLA':>15}"
    print(head, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for layers in args.layers:
            path = os.path.join(tmp, f"gpt_l{layers}.yaml")
            with open(path, "w") as f:
                f.write(MODEL.format(layers=layers, **SIZES))
            for mode in ("forward", "training"):
                flag = ["--training"] if mode == "training" else []
                if jax_ok:
                    procs, compiles = [], []
                    for _ in range(args.repeat):
                        cmd = [sys.executable, __file__, "--xla-child", "--mode", mode, "--layer", str(layers)]
                        cpu, out = cpu_run(cmd, env=jax_env())
                        procs.append(cpu)
                        compiles.append(json.loads(out.strip().splitlines()[-1])["lower_compile_s"])
                    proc, comp = statistics.median(procs), statistics.median(compiles)
                for search in args.search:
                    runs = [cpu_run(sp_cmd + ["plan", path, "--search", search, "--format", "json"] + flag)
                            for _ in range(args.repeat)]
                    sp = statistics.median(cpu for cpu, _ in runs)
                    objective = json.loads(runs[-1][1])["totals"]["objective"]
                    line = f"{layers:>6}  {mode:>8}  {search:>6}  {sp:>9.2f}  {objective:>11.4g}"
                    if jax_ok:
                        line += f"  {proc:>11.2f}  {comp:>17.2f}  {sp / comp:>11.2f}x  {sp / proc:>14.2f}x"
                    print(line, flush=True)


if __name__ == "__main__":
    main()
