"""The one GPU catalogue (`llmmath.gpus`): internally consistent, a few published
figures written here from the datasheets, and the one capacity rule used by every
command and explorer."""

import re

import pytest

from llmmath import presets
from llmmath.config import ConfigError
from llmmath.gpus import DEFAULT_GPU, GPUS, gpu_named
from llmmath.memory import GPU_80GB
from llmmath.parallel import CLUSTERS
from llmmath.roofline import GPUS as ROOFLINE_GPUS
from llmmath.roofline import decode_step
from llmmath.serving_cli import GPU_NAMES, memory_report


def test_catalogue_covers_the_common_gpus():
    names = set(GPUS)
    for wanted in (
        "A100-SXM4-40GB",
        "A100-PCIE-40GB",
        "A100-SXM4-80GB",
        "A100-PCIE-80GB",
        "H100-SXM5-80GB",
        "H100-PCIE-80GB",
        "H100-NVL-94GB",
        "H200-SXM-141GB",
        "B200-SXM-180GB",
        "L4-24GB",
        "L40S-48GB",
        "RTX-4090-24GB",
        "MI300X-192GB",
    ):
        assert wanted in names
    assert len(GPUS) >= 17
    assert GPU_NAMES == tuple(GPUS) and DEFAULT_GPU in GPUS


@pytest.mark.parametrize("name", sorted(GPUS))
def test_each_row_is_consistent(name):
    g = GPUS[name]
    assert g.name == name and g.source
    # the capacity rule: the vendor's "N GB", the last part of the name, as N·10⁹ B
    (gb,) = re.findall(r"(\d+)GB$", name)
    assert g.memory == int(gb) * 10**9
    assert g.ridge_point == g.peak_flops / g.bandwidth
    assert 1e13 < g.peak_flops < 1e16 and 1e11 < g.bandwidth < 1e13
    if g.fp8_flops is not None:
        assert g.fp8_flops == pytest.approx(2 * g.peak_flops, rel=0.02)  # about twice
    if g.reported_memory is not None:
        assert g.reported_memory > g.memory  # the rule leaves the driver a margin
    assert g.fits(g.memory) and not g.fits(g.memory + 1)


def test_published_figures():
    h100 = GPUS["H100-SXM5-80GB"]
    assert (h100.peak_flops, h100.bandwidth) == (989.4e12, 3.35e12)
    assert h100.reported_memory == 81559 * 2**20 == 85_520_809_984  # nvidia-smi
    assert GPUS["A100-SXM4-80GB"].reported_memory == 81920 * 2**20
    assert GPUS["A100-SXM4-80GB"].bandwidth == 2039e9
    assert GPUS["A100-PCIE-80GB"].bandwidth == 1935e9
    assert GPUS["H200-SXM-141GB"].bandwidth == 4.8e12
    assert GPUS["MI300X-192GB"].peak_flops == 1307.4e12
    assert GPUS["L40S-48GB"].fp8_flops == 733e12
    assert h100.ridge_point == pytest.approx(295.3, abs=0.1)


def test_one_capacity_everywhere():
    assert GPU_80GB == GPUS[DEFAULT_GPU].memory == 80 * 10**9
    for name, g in ROOFLINE_GPUS.items():
        assert g is GPUS[name]
    for c in CLUSTERS.values():
        assert c.gpu is GPUS[c.gpu.name] and c.memory == c.gpu.memory
    cfg = presets.load("llama-3-8b")
    for name in ("A100-SXM4-40GB", "L4-24GB", "MI300X-192GB"):
        r = memory_report("llama-3-8b", cfg, gpu=name)
        assert r["gpu_bytes"] == GPUS[name].memory
        assert r["fits"] is (r["total_bytes"] <= GPUS[name].memory)
    assert decode_step(cfg, "L4-24GB").gpu is GPUS["L4-24GB"]


def test_unknown_gpu_is_refused_by_name():
    with pytest.raises(ConfigError, match="gpu must be one of A100-SXM4-40GB"):
        gpu_named("B300")
