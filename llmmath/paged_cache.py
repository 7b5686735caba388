"""The paged KV cache: blocks of B tokens, the waste in each sequence's last block, how
many sequences fit, and prefix sharing.

vLLM's PagedAttention (Kwon et al. 2023, Sec. 4.1-4.3) stores each sequence's keys and
values in fixed-size blocks of B tokens, allocated on demand, so a sequence of t tokens
holds ⌈t/B⌉ blocks and wastes at most B − 1 token slots, all in its last block. A
system that instead reserves a contiguous region for the longest sequence it may see
wastes the rest of that region (Sec. 3: 20-38 % of the cache used in existing systems).
Sequences that share a prompt prefix share its full blocks (Sec. 4.4, copy-on-write):
n sequences with a P-token prefix hold ⌊P/B⌋ shared blocks once.

One block holds B tokens of every layer, K and V: B × `kv_cache_bytes_per_token`
bytes. `BlockTable` simulates the allocator, block by block, for the tests and the
chapter.

Explained in the chapter *Serving* (``chapters/09b_serving.ipynb``).
"""

from __future__ import annotations

from llmmath.config import ConfigError, ModelConfig, check_positive_int
from llmmath.kvcache import kv_cache_bytes, kv_cache_bytes_per_token
from llmmath.messages import gettext as _


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks a sequence of ``tokens`` tokens holds: ⌈t/B⌉.

    Raises:
        ConfigError: ``tokens`` or ``block_size`` not a positive integer.
    """
    check_positive_int("tokens", tokens)
    check_positive_int("block_size", block_size)
    return -(-tokens // block_size)


def padded_tokens(tokens: int, block_size: int) -> int:
    """Token slots a sequence holds: ⌈t/B⌉·B (what ``kv-cache --block-size`` counts)."""
    return blocks_for(tokens, block_size) * block_size


def last_block_waste(tokens: int, block_size: int) -> int:
    """Empty slots in the last block: ⌈t/B⌉·B − t, between 0 and B − 1."""
    return padded_tokens(tokens, block_size) - tokens


def block_bytes(cfg: ModelConfig, block_size: int, dtype: str = "bf16") -> int:
    """Bytes of one block: B tokens of K and V in every layer,
    B × `kv_cache_bytes_per_token`.

    Raises:
        ConfigError: ``block_size`` not a positive integer, or an unknown dtype.
    """
    check_positive_int("block_size", block_size)
    return block_size * kv_cache_bytes_per_token(cfg, dtype)


def blocks_per_gpu(
    cfg: ModelConfig,
    free_bytes: int,
    block_size: int = 16,
    dtype: str = "bf16",
) -> int:
    """Blocks that fit in ``free_bytes`` (the GPU's memory less the weights and the
    runtime's share): ⌊free / block bytes⌋, 0 if ``free_bytes`` ≤ 0."""
    return max(free_bytes, 0) // block_bytes(cfg, block_size, dtype)


def sequences_that_fit(
    cfg: ModelConfig,
    free_bytes: int,
    seq_len: int,
    block_size: int = 16,
    dtype: str = "bf16",
) -> int:
    """Sequences of ``seq_len`` tokens the paged cache holds at once: blocks per GPU
    over ⌈t/B⌉."""
    return blocks_per_gpu(cfg, free_bytes, block_size, dtype) // blocks_for(
        seq_len, block_size
    )


def reserved_sequences(
    cfg: ModelConfig, free_bytes: int, max_len: int, dtype: str = "bf16"
) -> int:
    """Sequences a cache that reserves ``max_len`` contiguous slots for each one
    holds, however short they turn out: ⌊free / cache of one max_len sequence⌋."""
    return max(free_bytes, 0) // kv_cache_bytes(cfg, 1, max_len, dtype)


def shared_prefix_blocks(
    sequences: int, prefix: int, suffix: int, block_size: int
) -> tuple[int, int]:
    """Blocks held by ``sequences`` sequences of ``prefix`` shared tokens and
    ``suffix`` own tokens each: (without sharing, with sharing). With sharing the
    ⌊P/B⌋ full prefix blocks are held once; the partly filled one is copied on write
    into each sequence (Kwon et al. 2023, Sec. 4.4).

    Raises:
        ConfigError: a count that is not a positive integer (``suffix`` may be 0).
    """
    check_positive_int("sequences", sequences)
    check_positive_int("prefix", prefix)
    if isinstance(suffix, bool) or not isinstance(suffix, int) or suffix < 0:
        raise ConfigError(
            _("{name} must be a non-negative integer, got {value}").format(
                name="suffix", value=repr(suffix)
            )
        )
    each = blocks_for(prefix + suffix, block_size)
    shared = prefix // block_size
    return sequences * each, shared + sequences * (each - shared)


class BlockTable:
    """A block allocator as vLLM's (Kwon et al. 2023, Sec. 4.2): each sequence maps to
    a list of physical blocks; blocks are reference-counted, so a fork shares them and
    a write into a shared, partly filled block copies it first.

    ``num_blocks``: blocks in the pool; ``block_size``: tokens per block.
    """

    def __init__(self, num_blocks: int, block_size: int):
        check_positive_int("num_blocks", num_blocks)
        check_positive_int("block_size", block_size)
        self.block_size = block_size
        self.free = list(range(num_blocks - 1, -1, -1))
        self.refs: dict[int, int] = {}
        self.tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}
        self._next = 0

    def _take(self) -> int:
        if not self.free:
            raise ConfigError(_("out of KV cache blocks"))
        block = self.free.pop()
        self.refs[block] = 1
        return block

    def _drop(self, block: int) -> None:
        self.refs[block] -= 1
        if self.refs[block] == 0:
            del self.refs[block]
            self.free.append(block)

    def add(self, tokens: int = 0) -> int:
        """A new sequence (its id) holding ``tokens`` tokens."""
        seq, self._next = self._next, self._next + 1
        self.tables[seq], self.lengths[seq] = [], 0
        if tokens:
            self.append(seq, tokens)
        return seq

    def append(self, seq: int, tokens: int = 1) -> None:
        """Write ``tokens`` more tokens of ``seq``: into its last block while it has
        room (copying it first if shared), then into new blocks."""
        table, b = self.tables[seq], self.block_size
        for _token in range(tokens):
            if self.lengths[seq] % b == 0:
                table.append(self._take())
            elif self.refs[table[-1]] > 1:  # copy on write
                self._drop(table[-1])
                table[-1] = self._take()
            self.lengths[seq] += 1

    def fork(self, seq: int) -> int:
        """A new sequence sharing every block of ``seq`` (parallel sampling, a shared
        prompt)."""
        child = self.add()
        self.tables[child] = list(self.tables[seq])
        self.lengths[child] = self.lengths[seq]
        for block in self.tables[child]:
            self.refs[block] += 1
        return child

    def remove(self, seq: int) -> None:
        """Free a finished sequence's blocks (those no other sequence shares)."""
        for block in self.tables.pop(seq):
            self._drop(block)
        del self.lengths[seq]

    @property
    def used(self) -> int:
        """Physical blocks in use."""
        return len(self.refs)

    def wasted_slots(self) -> int:
        """Empty token slots in the blocks in use (each shared block counted once)."""
        filled: dict[int, int] = {}
        for seq, table in self.tables.items():
            for i, block in enumerate(table):
                n = min(self.block_size, self.lengths[seq] - i * self.block_size)
                filled[block] = max(filled.get(block, 0), n)
        return sum(self.block_size - n for n in filled.values())
