"""The paged KV cache (`llmmath.paged_cache`): closed forms written here, and the block
allocator simulated token by token against them."""

import random

import pytest

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.paged_cache import (
    BlockTable,
    block_bytes,
    blocks_for,
    blocks_per_gpu,
    last_block_waste,
    padded_tokens,
    reserved_sequences,
    sequences_that_fit,
    shared_prefix_blocks,
)

L, KV = 32, 8 * 128  # Llama-3-8B: 32 layers, 8 KV heads of 128


def test_blocks_and_waste():
    assert [blocks_for(t, 16) for t in (1, 15, 16, 17, 32, 33)] == [1, 1, 1, 2, 2, 3]
    assert [last_block_waste(t, 16) for t in (1, 16, 17, 100)] == [15, 0, 15, 12]
    assert padded_tokens(100, 16) == 112
    for t in range(1, 200):
        assert 0 <= last_block_waste(t, 16) < 16


def test_blocks_per_gpu_and_sequences_that_fit():
    cfg = presets.load("llama-3-8b")
    one_block = 16 * 2 * L * KV * 2  # 16 tokens, K and V, bf16
    assert block_bytes(cfg, 16) == one_block == 2 * 2**20  # 2 MiB
    free = 60 * 10**9
    assert blocks_per_gpu(cfg, free, 16) == free // one_block
    blocks = free // one_block
    assert sequences_that_fit(cfg, free, 1000, 16) == blocks // 63  # ceil(1000/16)
    # reserving 8192 slots per sequence holds far fewer 1000-token sequences
    assert reserved_sequences(cfg, free, 8192) == free // (8192 * 2 * L * KV * 2)
    assert sequences_that_fit(cfg, free, 1000) > 8 * reserved_sequences(cfg, free, 8192)
    assert blocks_per_gpu(cfg, -5, 16) == 0


def test_prefix_sharing_closed_form():
    # 4 sequences, a 100-token prompt, 50 tokens each: ceil(150/16) = 10 blocks each;
    # 6 full prompt blocks shared, the 7th (4 tokens) copied on write
    assert shared_prefix_blocks(4, 100, 50, 16) == (40, 6 + 4 * 4)
    assert shared_prefix_blocks(1, 100, 0, 16) == (7, 7)
    with pytest.raises(ConfigError, match="suffix"):
        shared_prefix_blocks(2, 10, -1, 16)


def test_allocator_matches_the_closed_forms():
    rng = random.Random(0)
    for _ in range(50):
        b = rng.choice([1, 8, 16, 32])
        table = BlockTable(100_000, b)
        lengths = [rng.randint(1, 500) for _ in range(rng.randint(1, 12))]
        seqs = [table.add(t) for t in lengths]
        assert table.used == sum(-(-t // b) for t in lengths)
        assert table.wasted_slots() == sum(-(-t // b) * b - t for t in lengths)
        table.remove(seqs[0])
        assert table.used == sum(-(-t // b) for t in lengths[1:])


def test_allocator_prefix_sharing_copy_on_write():
    rng = random.Random(1)
    for _ in range(50):
        b, n = rng.choice([4, 16]), rng.randint(1, 8)
        prefix, suffix = rng.randint(1, 300), rng.randint(0, 300)
        table = BlockTable(100_000, b)
        parent = table.add(prefix)
        children = [table.fork(parent) for _ in range(n - 1)]
        for seq in [parent, *children]:
            table.append(seq, suffix)
        assert table.used == shared_prefix_blocks(n, prefix, suffix, b)[1]


def test_allocator_runs_out():
    table = BlockTable(2, 16)
    table.add(32)
    with pytest.raises(ConfigError, match="out of KV cache blocks"):
        table.add(1)
