"""The one GPU catalogue: every accelerator the book, the commands and the explorers
name, with the figures of its datasheet.

One row per GPU (`GPU`): memory, dense 16-bit tensor FLOP/s, fp8 FLOP/s where the part
has fp8 tensor cores, dense int8 tensor ops/s, memory bandwidth, the link between the
GPUs of one node, and the datasheet the figures come from. Peak rates are dense:
datasheets that print the 2:4-sparsity figure (twice the dense rate) are halved, and
the source says so.

**The link's direction convention.** ``GPU.link_bandwidth`` is what one GPU moves to
the other GPUs of its node, *both directions added*, as NVIDIA and AMD state it (an
H100 SXM's "NVLink 900 GB/s" is 450 GB/s each way; ``GPU.link_bandwidth_one_way``).
`llmmath.parallel.Cluster` times collectives with the one-way figure.

**The capacity rule.** What "fits" means everywhere (``python -m llmmath memory``,
``parallel``, the roofline, the explorers and the calculator page): total bytes ≤
``GPU.memory``, the capacity *as the vendor states it*, read in decimal units, so an
"80 GB" part holds 80·10⁹ bytes. The driver reports more for every part measured here
(an H100 80 GB shows 81,559 MiB = 85,520,809,984 bytes in nvidia-smi, an A100 80 GB
81,920 MiB; ``GPU.reported_memory``), so the rule leaves a margin of 4–7 % for the CUDA
context, the allocator and activations that the counts leave out; it is an upper bound
on what fits, never a promise that more would. ``llmmath.memory.GPU_80GB`` is this rule
for an 80 GB part.

**The names people type** (`match_gpu`, `gpu_named`, and ``--gpu`` of every command:
``memory``, ``parallel``, ``train-memory``). A catalogue name in any case names its GPU
(``h100-sxm5-80gb``). Otherwise the text is cut into words at ``-``, ``_`` and spaces,
the vendor's words (NVIDIA, AMD, GeForce, RTX, Tesla, Instinct) are dropped, and every
word left must be a distinct part of a catalogue name, which is *chip*[-*form*]-*memory*
(``H100``-``SXM5``-``80GB``): the chip exactly (``h100``, ``4090``, ``mi300x``; ``l40``
is not ``L40S``), the form exactly or ``sxm`` for any SXM generation, the memory as
``80gb``, ``80g`` or ``80``. The GPUs whose names hold every word are the matches:

- one match: that GPU (``H200``, ``mi300x``, ``4090``, ``H100-SXM``, ``h100-pcie``);
- several, all of one chip (one family): **the family rule** picks the SXM board
  first, then the one with the most memory (``h100`` and ``h100-80gb`` →
  H100-SXM5-80GB, ``a100`` and ``a100-80gb`` → A100-SXM4-80GB, ``a100-40gb`` →
  A100-SXM4-40GB, ``a100-pcie`` → A100-PCIE-80GB): the part a reader typing the
  family's name most likely means, the one its headline figures and the training
  clusters use. `match_gpu` returns a note that says so, and the commands print it
  (``"gpu_note"`` in their JSON);
- several chips (``80gb``, ``sxm5``): refused, "did you mean" naming every match;
- none: refused, "did you mean" naming the closest catalogue names (as an unknown preset
  is, `llmmath.errors.closest`).

So ``parallel``'s old cluster names (``h100``, ``h800``, ``a100``) read as the
catalogue's H100-SXM5-80GB, H800-SXM5-80GB and A100-SXM4-80GB, its clusters' GPUs.

Standard library only (the site's explorers import it on Pyodide). Explained in the
chapters *The KV cache* (``chapters/07_kv_cache.ipynb``) and *Memory and speed*
(``chapters/09_memory.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from llmmath.messages import N_, Message, join
from llmmath.messages import gettext as _


@dataclass(frozen=True)
class GPU:
    """Published figures of one accelerator.

    ``peak_flops``: dense 16-bit tensor-core FLOP/s (bf16; fp16 on parts without bf16:
    V100, T4). ``bandwidth``: bytes/s of device memory. ``memory``: bytes as the vendor
    states the capacity (GB = 10⁹ bytes), the one capacity every "fits" compares with.
    ``fp8_flops``: dense fp8 tensor FLOP/s, None where the part has none.
    ``reported_memory``: bytes the driver reports (nvidia-smi's MiB × 2²⁰), None where
    the book has no measurement. ``source``: the datasheet, and how a figure was read
    from it. ``int8_ops``: dense int8 tensor ops/s (None where the datasheet gives
    none), from ``int8_source``. ``link``: how the GPUs of one node talk (NVLink,
    Infinity Fabric, PCIe); ``link_bandwidth``: bytes/s per GPU over it, both
    directions added; both from ``link_source``.
    """

    name: str
    peak_flops: float
    bandwidth: float
    memory: int
    source: str
    fp8_flops: float | None = None
    reported_memory: int | None = None
    int8_ops: float | None = None
    int8_source: str = ""
    link: str | None = None
    link_bandwidth: float | None = None
    link_source: str = ""

    @property
    def link_bandwidth_one_way(self) -> float | None:
        """Bytes/s one GPU sends in one direction: half of ``link_bandwidth``."""
        return None if self.link_bandwidth is None else self.link_bandwidth / 2

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte above which a kernel is compute-bound (peak ÷ bandwidth)."""
        return self.peak_flops / self.bandwidth

    def fits(self, total_bytes: int) -> bool:
        """Whether ``total_bytes`` fit by the capacity rule: ≤ ``memory``."""
        return total_bytes <= self.memory


GB = 10**9
_SPARSE = "the datasheet's figures are with sparsity; dense is half"
_A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOPS dense (624 with sparsity); "
)
_H100 = "NVIDIA H100 Tensor Core GPU datasheet: "

_A100_INT8 = (
    1248e12 / 2,
    "NVIDIA A100 Tensor Core GPU datasheet: INT8 1,248 TOPS with sparsity (624 dense)",
)
_NVLINK = "NVLink {} GB/s per GPU (both directions, {} each way)"
_PCIE_BRIDGE = "; an NVLink bridge joins pairs of cards at {} GB/s"


def _pcie(gen: int, gb: int, datasheet: str, extra: str = "") -> dict:
    return {
        "link": f"PCIe Gen{gen} x16",
        "link_bandwidth": gb * 1e9,
        "link_source": f"{datasheet}: PCIe Gen{gen} {gb} GB/s (both directions, "
        f"{gb // 2} each way){extra}",
    }


def _nvlink(gen: int, gb: int, datasheet: str) -> dict:
    return {
        "link": f"NVLink {gen}",
        "link_bandwidth": gb * 1e9,
        "link_source": f"{datasheet}: " + _NVLINK.format(f"{gb:,}", f"{gb // 2:,}"),
    }


def _int8(ops: float, source: str) -> dict:
    return {"int8_ops": ops, "int8_source": source}


_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet"
_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet"
_AMD_IF = (
    "AMD Instinct {} platform: 7 scale-up Infinity Fabric links of 128 GB/s peak "
    "each, one to each other GPU of the eight (the GPU has 8 links), 896 GB/s per "
    "GPU; read as both directions added: a link's 16 lanes at 32 Gb/s carry 64 GB/s "
    "each way (AMD does not say)"
)

#: Dense int8 and the node's link, by GPU (added to the rows of `_rows`).
_INT8_AND_LINK: dict[str, dict] = {
    "A100-SXM4-40GB": {**_int8(*_A100_INT8), **_nvlink(3, 600, _A100_DS)},
    "A100-PCIE-40GB": {
        **_int8(*_A100_INT8),
        **_pcie(4, 64, _A100_DS, _PCIE_BRIDGE.format(600)),
    },
    "A100-SXM4-80GB": {**_int8(*_A100_INT8), **_nvlink(3, 600, _A100_DS)},
    "A100-PCIE-80GB": {
        **_int8(*_A100_INT8),
        **_pcie(4, 64, _A100_DS, _PCIE_BRIDGE.format(600)),
    },
    "H100-SXM5-80GB": {
        **_int8(1979e12, _H100 + "H100 SXM: INT8 3,958 TOPS with sparsity; " + _SPARSE),
        **_nvlink(4, 900, _H100_DS + ", H100 SXM"),
    },
    "H100-PCIE-80GB": {
        **_int8(
            1513e12, _H100 + "H100 PCIe: INT8 3,026 TOPS with sparsity; " + _SPARSE
        ),
        **_pcie(5, 128, _H100_DS + ", H100 PCIe", _PCIE_BRIDGE.format(600)),
    },
    "H100-NVL-94GB": {
        **_int8(
            1670.5e12, _H100 + "H100 NVL: INT8 3,341 TOPS with sparsity; " + _SPARSE
        ),
        **_pcie(5, 128, _H100_DS + ", H100 NVL", _PCIE_BRIDGE.format(600)),
    },
    "H800-SXM5-80GB": {
        **_int8(
            1979e12,
            "the H100 SXM's: NVIDIA H100 datasheet INT8 3,958 TOPS with sparsity, "
            "1,979 dense (no H800 datasheet at hand)",
        ),
        "link": "NVLink 4, cut",
        "link_bandwidth": 400e9,
        "link_source": "Insights into DeepSeek-V3 (arXiv 2505.09343), Sec. 4.1: "
        "NVLink bandwidth in H800 SXM nodes reduced from 900 GB/s to 400 GB/s (both "
        "directions, as NVIDIA states the H100's 900; 200 each way); the DeepSeek-V3 "
        "report (Sec. 3.2.2) reaches about 160 GB/s in practice",
    },
    "H200-SXM-141GB": {
        **_int8(
            1979e12,
            "NVIDIA H200 Tensor Core GPU datasheet: H200 SXM: INT8 3,958 TOPS with "
            "sparsity; " + _SPARSE,
        ),
        **_nvlink(4, 900, "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM"),
    },
    "B200-SXM-180GB": {
        **_int8(
            4.5e15,
            "NVIDIA HGX B200 specifications: INT8 72 POPS with sparsity for eight "
            "GPUs, 9 per GPU; " + _SPARSE,
        ),
        "link": "NVLink 5",
        "link_bandwidth": 1.8e12,
        "link_source": "NVIDIA HGX B200 specifications: NVSwitch GPU-to-GPU bandwidth "
        "1.8 TB/s (both directions, 900 GB/s each way)",
    },
    "L4-24GB": {
        **_int8(
            242.5e12,
            "NVIDIA L4 Tensor Core GPU datasheet: INT8 485 TOPS with sparsity; "
            + _SPARSE,
        ),
        **_pcie(4, 64, "NVIDIA L4 Tensor Core GPU datasheet", "; no NVLink"),
    },
    "L40S-48GB": {
        **_int8(
            733e12,
            "NVIDIA L40S GPU datasheet: INT8 733 TOPS dense (1,466 with sparsity)",
        ),
        **_pcie(4, 64, "NVIDIA L40S GPU datasheet", "; no NVLink"),
    },
    "A10-24GB": {
        **_int8(
            250e12,
            "NVIDIA A10 Tensor Core GPU datasheet: INT8 250 TOPS dense (500 with "
            "sparsity)",
        ),
        **_pcie(4, 64, "NVIDIA A10 Tensor Core GPU datasheet", "; no NVLink"),
    },
    "RTX-4090-24GB": {
        **_int8(
            660.6e12,
            "NVIDIA Ada Lovelace GPU architecture whitepaper, GeForce RTX 4090: INT8 "
            "tensor 660.6 TOPS dense (1,321.2 with sparsity); four times the bf16 "
            "row, whose rate is with FP32 accumulate (half that with FP16 accumulate)",
        ),
        "link": "PCIe Gen4 x16",
        "link_bandwidth": 64e9,
        "link_source": "NVIDIA GeForce RTX 4090 specifications: PCI Express Gen 4, no "
        "NVLink; 64 GB/s both directions as NVIDIA's datasheets state PCIe Gen4 x16 "
        "(A100, L40S)",
    },
    "V100-SXM2-32GB": {
        "link": "NVLink 2",
        "link_bandwidth": 300e9,
        "link_source": "NVIDIA V100 Tensor Core GPU datasheet: V100 SXM2: NVLink "
        "300 GB/s per GPU (both directions, 150 each way); no int8 tensor rate given",
    },
    "T4-16GB": {
        **_int8(
            130e12,
            "NVIDIA T4 Tensor Core GPU datasheet: INT8 130 TOPS (no sparsity on "
            "Turing)",
        ),
        "link": "PCIe Gen3 x16",
        "link_bandwidth": 32e9,
        "link_source": "NVIDIA T4 Tensor Core GPU datasheet: x16 PCIe Gen3, "
        "interconnect bandwidth 32 GB/s (both directions, 16 each way)",
    },
    "MI250X-128GB": _int8(
        383e12,
        "AMD Instinct MI250X data sheet: INT8 383 TOPS, the bf16 rate (no link "
        "figure: AMD's up to 800 GB/s is the aggregate of up to eight Infinity Fabric "
        "links per card, shared by its two dies, other GPUs and the CPU, so what "
        "reaches the other GPUs depends on the platform)",
    ),
    "MI300X-192GB": {
        **_int8(
            2614.9e12,
            "AMD Instinct MI300X data sheet: INT8 2,614.9 TOPS dense (twice with "
            "sparsity)",
        ),
        "link": "Infinity Fabric (7 links)",
        "link_bandwidth": 896e9,
        "link_source": _AMD_IF.format("MI300X"),
    },
    "MI325X-256GB": {
        **_int8(
            2614.9e12,
            "AMD Instinct MI325X data sheet: INT8 2,614.9 TOPS dense (twice with "
            "sparsity)",
        ),
        "link": "Infinity Fabric (7 links)",
        "link_bandwidth": 896e9,
        "link_source": _AMD_IF.format("MI325X"),
    },
}


def _rows() -> dict[str, GPU]:
    rows = [
        GPU(
            "A100-SXM4-40GB", 312e12, 1555e9, 40 * GB, _A100 + "40 GB HBM2, 1,555 GB/s"
        ),
        GPU(
            "A100-PCIE-40GB", 312e12, 1555e9, 40 * GB, _A100 + "40 GB HBM2, 1,555 GB/s"
        ),
        GPU(
            "A100-SXM4-80GB",
            312e12,
            2039e9,
            80 * GB,
            _A100 + "80 GB HBM2e, 2,039 GB/s; nvidia-smi reports 81920 MiB",
            reported_memory=81920 * 2**20,
        ),
        GPU(
            "A100-PCIE-80GB", 312e12, 1935e9, 80 * GB, _A100 + "80 GB HBM2e, 1,935 GB/s"
        ),
        GPU(
            "H100-SXM5-80GB",
            989.4e12,
            3.35e12,
            80 * GB,
            _H100 + "H100 SXM: BF16 1,979 and FP8 3,958 TFLOPS with sparsity (989.4 "
            "and 1,978.9 dense), 80 GB HBM3, 3.35 TB/s; nvidia-smi reports 81559 MiB",
            1978.9e12,
            81559 * 2**20,
        ),
        GPU(
            "H100-PCIE-80GB",
            756e12,
            2.0e12,
            80 * GB,
            _H100 + "H100 PCIe: BF16 1,513 and FP8 3,026 TFLOPS with sparsity; "
            "80 GB HBM2e, 2 TB/s; " + _SPARSE,
            1513e12,
        ),
        GPU(
            "H100-NVL-94GB",
            835.5e12,
            3.9e12,
            94 * GB,
            _H100 + "H100 NVL: BF16 1,671 and FP8 3,341 TFLOPS with sparsity; "
            "94 GB HBM3, 3.9 TB/s; " + _SPARSE,
            1670.5e12,
        ),
        GPU(
            "H800-SXM5-80GB",
            989.4e12,
            3.35e12,
            80 * GB,
            "H100 SXM compute and memory with NVLink cut to 400 GB/s (Insights into "
            "DeepSeek-V3, arXiv 2505.09343, Sec. 4.1; no H800 datasheet at hand)",
            1978.9e12,
        ),
        GPU(
            "H200-SXM-141GB",
            989.4e12,
            4.8e12,
            141 * GB,
            "NVIDIA H200 Tensor Core GPU datasheet: H200 SXM: BF16 1,979 and FP8 3,958 "
            "TFLOPS with sparsity, 141 GB HBM3e, 4.8 TB/s; " + _SPARSE,
            1978.9e12,
        ),
        GPU(
            "B200-SXM-180GB",
            2.25e15,
            8e12,
            180 * GB,
            "NVIDIA Blackwell datasheet, HGX B200: per GPU 180 GB HBM3E, FP16/BF16 "
            "4.5 and FP8 9 PFLOPS with sparsity (all tensor figures but FP64); "
            "bandwidth 8 TB/s from the DGX B200 page's 64 TB/s for eight GPUs (the "
            "datasheet's HGX column prints 7.7 TB/s per GPU); " + _SPARSE,
            4.5e15,
        ),
        GPU(
            "L4-24GB",
            121e12,
            300e9,
            24 * GB,
            "NVIDIA L4 Tensor Core GPU datasheet: BF16 242 and FP8 485 TFLOPS with "
            "sparsity, 24 GB GDDR6, 300 GB/s; " + _SPARSE,
            242.5e12,
        ),
        GPU(
            "L40S-48GB",
            362.05e12,
            864e9,
            48 * GB,
            "NVIDIA L40S GPU datasheet: BF16 362.05 and FP8 733 TFLOPS dense (733 and "
            "1,466 with sparsity), 48 GB GDDR6, 864 GB/s",
            733e12,
        ),
        GPU(
            "A10-24GB",
            125e12,
            600e9,
            24 * GB,
            "NVIDIA A10 Tensor Core GPU datasheet: BF16 125 TFLOPS dense (250 with "
            "sparsity), 24 GB GDDR6, 600 GB/s",
        ),
        GPU(
            "RTX-4090-24GB",
            165.2e12,
            1008e9,
            24 * GB,
            "NVIDIA Ada Lovelace GPU architecture whitepaper, GeForce RTX 4090: "
            "FP16/BF16 tensor 165.2 TFLOPS dense with FP32 accumulate, 24 GB GDDR6X, "
            "1,008 GB/s (fp8 left out: its rate depends on the accumulator)",
        ),
        GPU(
            "V100-SXM2-32GB",
            125e12,
            900e9,
            32 * GB,
            "NVIDIA V100 Tensor Core GPU datasheet: V100 SXM2: FP16 tensor 125 TFLOPS "
            "(no bf16), 32 GB HBM2, 900 GB/s",
        ),
        GPU(
            "T4-16GB",
            65e12,
            320e9,
            16 * GB,
            "NVIDIA T4 Tensor Core GPU datasheet: mixed FP16/FP32 65 TFLOPS (no bf16), "
            "16 GB GDDR6; bandwidth from the T4 product brief: up to 320 GB/s peak "
            "(the datasheet rounds it to 300 GB/s)",
        ),
        GPU(
            "MI250X-128GB",
            383e12,
            3.2768e12,
            128 * GB,
            "AMD Instinct MI250X data sheet: BF16 383 TFLOPS (no fp8), 128 GB HBM2e, "
            "3.2768 TB/s",
        ),
        GPU(
            "MI300X-192GB",
            1307.4e12,
            5.3e12,
            192 * GB,
            "AMD Instinct MI300X data sheet: BF16 1,307.4 and FP8 2,614.9 TFLOPS dense "
            "(twice with sparsity), 192 GB HBM3, 5.3 TB/s",
            2614.9e12,
        ),
        GPU(
            "MI325X-256GB",
            1307.4e12,
            6e12,
            256 * GB,
            "AMD Instinct MI325X data sheet: BF16 1,307.4 and FP8 2,614.9 TFLOPS dense "
            "(twice with sparsity), 256 GB HBM3E, 6 TB/s",
            2614.9e12,
        ),
    ]
    return {g.name: replace(g, **_INT8_AND_LINK.get(g.name, {})) for g in rows}


#: Every GPU of the catalogue by name, in the order above (NVIDIA data-centre parts by
#: generation, then workstation and older parts, then AMD).
GPUS: dict[str, GPU] = _rows()

#: The GPU the commands and explorers assume when none is named.
DEFAULT_GPU = "H100-SXM5-80GB"

_BY_LOWER = {name.lower(): gpu for name, gpu in GPUS.items()}


class GPUMatch(NamedTuple):
    """What a typed name resolves to: the ``gpu``, and a ``note`` saying which rule
    picked it when the name matched several GPUs of one family (None otherwise)."""

    gpu: GPU
    note: str | None = None


#: Words of a typed name that name no part: the vendors' and product lines' names.
VENDOR_WORDS = frozenset({"nvidia", "amd", "geforce", "rtx", "tesla", "instinct"})
#: The longest text `match_gpu` reads (a longer one is refused, shown shortened).
MAX_NAME = 100


def _words(text: str) -> list[str]:
    """``text`` lower-cased and cut at ``-``, ``_`` and spaces, vendor words dropped."""
    spaced = text.lower().replace("_", " ").replace("-", " ")
    return [w for w in spaced.split() if w not in VENDOR_WORDS]


def _parts(name: str) -> tuple[str, str | None, str]:
    """(chip, form or None, memory) of a catalogue name: ``("h100", "sxm5", "80gb")``,
    ``("4090", None, "24gb")``."""
    chip, *form, memory = _words(name)
    return chip, (form[0] if form else None), memory


def _word_fits(word: str, kind: int, part: str) -> bool:
    """Whether a typed ``word`` names ``part``, the chip (0), form (1) or memory (2)."""
    if kind == 1:
        return word == part or (word == "sxm" and part.startswith("sxm"))
    if kind == 2:
        return word in (part, part[:-1], part[:-2])  # 80gb, 80g, 80
    return word == part


def _holds(words: list[str], parts: tuple[str, str | None, str]) -> bool:
    """Whether every word names a distinct part of ``parts``."""
    free = [(kind, part) for kind, part in enumerate(parts) if part is not None]
    for word in words:
        hit = next((p for p in free if _word_fits(word, *p)), None)
        if hit is None:
            return False
        free.remove(hit)
    return True


def _family_pick(matches: list[GPU]) -> GPU:
    """The family rule: the SXM board first, then the most memory, then the
    catalogue's order."""
    order = list(GPUS)

    def key(g: GPU) -> tuple:
        form = _parts(g.name)[1] or ""
        return (not form.startswith("sxm"), -g.memory, order.index(g.name))

    return min(matches, key=key)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}")


def _unknown(text: str) -> str:
    """The rule for a text that names no GPU, with the closest names."""
    from llmmath.errors import closest, did_you_mean

    by_key = {name.lower(): name for name in GPUS}
    for name in GPUS:  # the chip alone suggests its family's pick
        chip = _parts(name)[0]
        family = [g for g in GPUS.values() if _parts(g.name)[0] == chip]
        by_key.setdefault(chip, _family_pick(family).name)
    near = closest(text.lower()[:MAX_NAME], list(by_key), n=3)
    names = list(dict.fromkeys(by_key[k] for k in near))
    return _(
        "must be a GPU of the catalogue: a name in any case, or a short name that "
        "names one (h100, H200, a100-80gb, mi300x, 4090); got {value}{hint}; GPUs: "
        "{names}"
    ).format(value=_shown(text), hint=did_you_mean(names), names=join(GPUS))


def _resolve(text: str) -> GPUMatch | str:
    """`match_gpu`'s answer, or the rule ``text`` breaks (without the field's name)."""
    exact = _BY_LOWER.get(text.lower())
    if exact is not None:
        return GPUMatch(exact)
    words = _words(text) if len(text) <= MAX_NAME else []
    matches = [g for g in GPUS.values() if words and _holds(words, _parts(g.name))]
    if not matches:
        return _unknown(text)
    if len(matches) == 1:
        return GPUMatch(matches[0])
    if len({_parts(g.name)[0] for g in matches}) > 1:
        from llmmath.errors import did_you_mean

        return _("must name one GPU of the catalogue; {value} names {n}{hint}").format(
            value=_shown(text),
            n=len(matches),
            hint=did_you_mean([g.name for g in matches]),
        )
    pick = _family_pick(matches)
    others = ", ".join(g.name for g in matches if g is not pick)
    return GPUMatch(
        pick, Message(FAMILY_NOTE, value=_shown(text), pick=pick.name, others=others)
    )


#: The note of a name the family rule read (`GPUMatch.note`): English in a JSON
#: report, in the reader's language where a text report shows it
#: (`llmmath.messages.translated`).
FAMILY_NOTE = N_(
    "{value} read as {pick} (also {others}): within one family the SXM board first, "
    "then the most memory; name another to choose it"
)


def match_gpu(name: str | GPU) -> GPUMatch:
    """The catalogue's GPU that ``name`` names, by the rules of this module's
    docstring, with a note when the family rule picked it among several (a `GPU` is
    returned as it is).

    Raises:
        ConfigError: a name that names no GPU, or several chips; the message says
        "did you mean" with catalogue names only."""
    if isinstance(name, GPU):
        return GPUMatch(name)
    from llmmath.errors import ConfigError

    if not isinstance(name, str):
        raise ConfigError(
            _("gpu must be a GPU's name, got {type}").format(type=type(name).__name__)
        )
    found = _resolve(name)
    if isinstance(found, str):
        raise ConfigError(_("gpu {rule}").format(rule=found))
    return found


def gpu_argument(text: str) -> str:
    """An argparse type for ``--gpu``: ``text`` as given when it names a GPU
    (`match_gpu`; the commands resolve it again and print the note), else
    argparse.ArgumentTypeError with the rule and "did you mean"."""
    found = _resolve(text)
    if isinstance(found, str):
        import argparse

        raise argparse.ArgumentTypeError(found)
    return text


#: One line for ``--help``: what ``--gpu`` takes (marked for translation: shown as
#: ``_(GPU_HELP)``).
GPU_HELP = N_(
    "a GPU of the catalogue (llmmath.gpus), any case, or a short name that names one "
    "(h100, H200, a100-80gb, mi300x, 4090; a family's name picks its SXM board, then "
    "the most memory)"
)


def gpu_named(name: str | GPU) -> GPU:
    """The catalogue's `GPU` that ``name`` names (`match_gpu`: any case, or a short
    name; a `GPU` is returned as it is).

    Raises:
        ConfigError: a name that names no GPU, or several chips; the message says
        "did you mean" with catalogue names only."""
    return match_gpu(name).gpu
