"""Where each logical HF tensor lives in vLLM's fused, sharded parameters (no vLLM needed)."""

from types import SimpleNamespace

import pytest
import torch

from esopt.backends.vllm import logical_slots

CONFIG = SimpleNamespace(hidden_size=8, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=2)
L = "model.layers.0."
SHAPES = {f"{L}self_attn.q_proj.weight": (8, 8), f"{L}self_attn.k_proj.weight": (4, 8),
          f"{L}self_attn.v_proj.weight": (4, 8), f"{L}self_attn.o_proj.weight": (8, 8),
          # Qwen2's q/k/v biases: fused into qkv_proj.bias as the weights' rows are
          f"{L}self_attn.q_proj.bias": (8,), f"{L}self_attn.k_proj.bias": (4,),
          f"{L}self_attn.v_proj.bias": (4,),
          f"{L}mlp.gate_proj.weight": (12, 8), f"{L}mlp.up_proj.weight": (12, 8),
          f"{L}mlp.down_proj.weight": (8, 12), f"{L}input_layernorm.weight": (8,),
          "model.embed_tokens.weight": (12, 8)}


def served(rank: int, size: int, logical: dict) -> dict:
    """The parameters one rank would hold, filled from the logical tensors via the slots."""
    slots = logical_slots(SHAPES, CONFIG, rank, size)
    shapes = {}
    for name, slot in slots.items():
        part = logical[name][slot.src].shape
        start = (slot.dst[0].start or 0) if part else 0
        need = (start + part[0], *part[1:]) if part else part
        old = shapes.get(slot.param, need)
        shapes[slot.param] = tuple(max(a, b) for a, b in zip(old, need, strict=True))
    params = {p: torch.full(s, float("nan")) for p, s in shapes.items()}
    for name, slot in slots.items():
        params[slot.param][slot.dst] = logical[name][slot.src]
    return params


def logical_rows(proj: str, rank: int, size: int) -> slice:
    """Rows of a logical q/k/v tensor that a rank holds (4 q heads, 2 KV heads, head_dim 2):
    split evenly, except that over 4 ranks each KV head is replicated on a pair of ranks."""
    rows = 8 if proj == "q" else 4
    if proj != "q" and size > 2:
        head = rank * 2 // size
        return slice(2 * head, 2 * head + 2)
    return slice(rank * rows // size, (rank + 1) * rows // size)


@pytest.mark.parametrize("size", [1, 2, 4])
def test_fused_and_sharded_slices_cover_every_logical_element_once(size):
    logical = {n: torch.arange(torch.Size(s).numel(), dtype=torch.float32).view(s) + 1000 * i
               for i, (n, s) in enumerate(SHAPES.items())}
    ranks = [served(r, size, logical) for r in range(size)]
    qkv = f"{L}self_attn.qkv_proj.weight"
    for r, params in enumerate(ranks):
        assert not torch.isnan(params[qkv]).any()  # q, k, v fill the fused rows exactly
        q_rows = 8 // size
        # vLLM's per-rank layout: [q shard; k shard; v shard]
        torch.testing.assert_close(params[qkv][:q_rows],
                                   logical[f"{L}self_attn.q_proj.weight"][r * q_rows:
                                                                         (r + 1) * q_rows])
        # The fused bias holds the q, k and v biases' rows in the places where the fused
        # weight holds their weights' rows: [q shard; k shard; v shard].
        bias = params[f"{L}self_attn.qkv_proj.bias"]
        expected = torch.cat([logical[f"{L}self_attn.{x}_proj.bias"][logical_rows(x, r, size)]
                              for x in "qkv"])
        assert torch.equal(bias, expected)
        weights = torch.cat([logical[f"{L}self_attn.{x}_proj.weight"][logical_rows(x, r, size)]
                             for x in "qkv"])
        assert torch.equal(params[qkv], weights)
    # Column-parallel q and gate/up rows, row-parallel o/down columns: the ranks' shards
    # put back together are the logical tensors.
    gate_up = f"{L}mlp.gate_up_proj.weight"
    gate = torch.cat([p[gate_up][: 12 // size] for p in ranks])
    torch.testing.assert_close(gate, logical[f"{L}mlp.gate_proj.weight"])
    down = torch.cat([p[f"{L}mlp.down_proj.weight"] for p in ranks], dim=1)
    torch.testing.assert_close(down, logical[f"{L}mlp.down_proj.weight"])
    norm = f"{L}input_layernorm.weight"
    assert all(torch.equal(p[norm], logical[norm]) for p in ranks)  # replicated


def test_kv_heads_are_replicated_when_fewer_than_ranks():
    slots = [logical_slots(SHAPES, CONFIG, r, 4)[f"{L}self_attn.k_proj.weight"] for r in range(4)]
    # 2 KV heads over 4 ranks: ranks 0-1 hold head 0, ranks 2-3 head 1 (2 rows each).
    assert [s.src[0] for s in slots] == [slice(0, 2), slice(0, 2), slice(2, 4), slice(2, 4)]
    assert slots[0].dst[0] == slice(2, 4)  # after the rank's 2 q rows


def _served_params(slots, local: dict) -> dict:
    """NaN-filled served parameters just large enough for the rank's slots."""
    shapes = {}
    for name, slot in slots.items():
        part = local[name].shape
        need = ((slot.dst[0].start or 0) + part[0], *part[1:])
        old = shapes.get(slot.param, need)
        shapes[slot.param] = tuple(max(a, b) for a, b in zip(old, need, strict=True))
    return {p: torch.nn.Parameter(torch.full(s, float("nan")), requires_grad=False)
            for p, s in shapes.items()}


@pytest.mark.parametrize("size", [1, 2, 4])
def test_each_rank_loads_perturbs_and_updates_only_its_slices(tiny_arch_dir, size):
    """A tensor-parallel rank reads only its slices of the float32 master and draws only
    their noise; what it serves and how it updates equal the slices of the whole."""
    from esopt.backends.vllm import ESWorker, assemble_master, load_master_slices
    from esopt.es.noise import add_noise_sum_, tensor_noise
    from esopt.runtime.checkpoint import read_master

    full = read_master(tiny_arch_dir)
    seeds, coeffs, scale = [11, 12, 13], [1.0, -0.5, 0.25], 1e-3
    updated = {n: t.clone() for n, t in full.items()}
    add_noise_sum_(updated, seeds, coeffs, scale)
    parts = []
    for rank in range(size):
        shapes, slots, master = load_master_slices(tiny_arch_dir, rank, size)
        for n, t in master.items():
            assert torch.equal(t, full[n][slots[n].src]), n
        if size > 1:  # the sharded matrices hold 1/size of their elements
            q = f"{L}self_attn.q_proj.weight"
            assert master[q].numel() * size == full[q].numel()
        worker = ESWorker.__new__(ESWorker)  # the worker's ES state without an engine
        worker.es_shapes, worker.es_slots, worker.es_master = shapes, slots, master
        worker.es_regions = {n: (shapes[n], slots[n].src) for n in shapes}
        worker.es_chunk_elements = 1000  # several chunks per tensor
        worker.es_params = _served_params(slots, master)
        worker.es_perturb(7, -1, 2e-3)
        for n, slot in slots.items():
            expected = (full[n] + tensor_noise(7, n, full[n].shape) * -2e-3)[slot.src]
            assert torch.equal(worker.es_params[slot.param].data[slot.dst], expected), n
        worker.es_add_update(seeds, coeffs, scale)
        for n, slot in slots.items():
            assert torch.equal(worker.es_master[n], updated[n][slot.src]), n
        parts.append(worker.es_master_state())
    whole = assemble_master(parts)
    assert all(torch.equal(whole[n], updated[n]) for n in full)
