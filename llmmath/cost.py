"""Time and cost of training from a price per GPU-hour.

A GPU-hour is one GPU busy for 3,600 seconds; a run of ``gpus`` GPUs for ``seconds``
takes gpus · seconds / 3600 GPU-hours and, at a price of ``price`` currency units per
GPU-hour, gpus · seconds · price / 3600 currency units (whatever currency the price is
given in: the catalogue holds no prices). A run of ``tokens`` tokens takes
⌈tokens / tokens per step⌉ steps: a last, partial batch is run as a whole step.

The same arithmetic from the other end: a model trained with C FLOPs on GPUs of peak
P FLOP/s at model FLOPs utilization MFU (Chowdhery et al. 2022, App. B) takes
C / (P · MFU) GPU-seconds. Llama 3 405B: 3.8·10²⁵ FLOPs (Llama 3 paper, Sec. 3.1) at
38–43 % MFU on H100s (Table 4) is 24–28 million H100-hours; Meta's model card
reports 30.84 million for the 405B model.

A layout's step time from `llmmath.parallel.plan` runs every FLOP at the peak: an
upper bound on the MFU, a lower bound on the hours. `step_at_mfu` stretches the same
step to a published MFU (`PUBLISHED_MFU`, Llama 3's lowest), and ``parallel`` prints
the cost as the range between the two.

Standard library only. Used by ``python -m llmmath parallel --price-per-gpu-hour``
(`llmmath.cli.parallel`); explained with the step time in *Many GPUs*
(``chapters/09c_many_gpus.ipynb``).
"""

from __future__ import annotations

import math

from llmmath.errors import ConfigError, check_positive_int
from llmmath.messages import gettext as _

SECONDS_PER_HOUR = 3600

#: The MFU a real run reached, for costs beside the layout's bound: 38 %, the lowest
#: BF16 MFU of Llama 3 405B's pre-training on H100s (`PUBLISHED_MFU_SOURCE`).
PUBLISHED_MFU = 0.38
PUBLISHED_MFU_SOURCE = (
    "Llama 3 paper (Dubey et al. 2024), Table 4: BF16 MFU of 43 % on 8,192 H100s and "
    "41 % on 16,384 with 8,192-token sequences, 38 % on 16,384 with 131,072-token "
    "sequences; the lowest"
)

#: The largest price per GPU-hour the checks accept (currency units): far above any
#: rental, low enough that no cost of a valid layout overflows a float.
MAX_PRICE = 1e6


def check_price(price: float) -> float:
    """``price`` as a float if it is a positive, finite number of at most `MAX_PRICE`.

    Raises:
        ConfigError: anything else (zero, negative, NaN, infinite, not a number)."""
    if isinstance(price, bool) or not isinstance(price, (int, float)):
        raise ConfigError(
            _("{name} must be a number, got {value}").format(
                name="price_per_gpu_hour", value=repr(price)
            )
        )
    if not (math.isfinite(price) and 0 < price <= MAX_PRICE):
        raise ConfigError(
            _(
                "{name} must be positive, finite and at most {limit}, got {value}"
            ).format(
                name="price_per_gpu_hour", limit=f"{MAX_PRICE:g}", value=repr(price)
            )
        )
    return float(price)


def gpu_hours(gpus: int, seconds: float) -> float:
    """GPU-hours of ``gpus`` GPUs busy for ``seconds``: gpus · seconds / 3600."""
    return gpus * seconds / SECONDS_PER_HOUR


def cost(gpus: int, seconds: float, price_per_gpu_hour: float) -> float:
    """Currency units (those of the price) of ``gpus`` GPUs for ``seconds`` at
    ``price_per_gpu_hour``: gpus · seconds · price / 3600.

    Raises:
        ConfigError: a price that `check_price` refuses."""
    return gpu_hours(gpus, seconds) * check_price(price_per_gpu_hour)


def steps_for(tokens: int, tokens_per_step: int) -> int:
    """Steps to train on ``tokens`` tokens: ⌈tokens / tokens_per_step⌉.

    Raises:
        ConfigError: either is not a positive int."""
    check_positive_int("tokens", tokens)
    check_positive_int("tokens_per_step", tokens_per_step)
    return -(-tokens // tokens_per_step)


def training_gpu_hours(flops: float, peak_flops: float, mfu: float) -> float:
    """GPU-hours to do ``flops`` model FLOPs on GPUs of ``peak_flops`` FLOP/s each at
    model FLOPs utilization ``mfu``: flops / (peak · MFU) / 3600.

    Raises:
        ConfigError: ``mfu`` not in (0, 1], or a non-positive FLOPs or peak."""
    check_mfu(mfu)
    if not (flops > 0 and peak_flops > 0):
        raise ConfigError(_("flops and peak_flops must be positive"))
    return flops / (peak_flops * mfu) / SECONDS_PER_HOUR


def check_mfu(mfu: float, name: str = "mfu") -> float:
    """``mfu`` as a float if it is a number in (0, 1].

    Raises:
        ConfigError: anything else (zero, negative, above 1, NaN, not a number)."""
    if isinstance(mfu, bool) or not isinstance(mfu, (int, float)):
        raise ConfigError(
            _("{name} must be a number, got {value}").format(name=name, value=repr(mfu))
        )
    if not 0 < mfu <= 1:
        raise ConfigError(
            _("{name} must be in (0, 1], got {value}").format(
                name=name, value=repr(mfu)
            )
        )
    return float(mfu)


def step_at_mfu(step_seconds: float, mfu_bound: float, mfu: float) -> float:
    """Seconds of a step that does the FLOPs of one taking ``step_seconds`` at model
    FLOPs utilization ``mfu_bound``, at ``mfu`` instead: step_seconds · mfu_bound /
    mfu (time is FLOPs over the peak times the MFU).

    Raises:
        ConfigError: ``mfu`` not in (0, 1], or above ``mfu_bound`` (the bound is the
        most a layout reaches: every FLOP at the peak)."""
    check_mfu(mfu)
    if mfu > mfu_bound:
        raise ConfigError(
            _(
                "mfu ({mfu}) is above this layout's bound ({bound}), which runs every "
                "FLOP at the peak"
            ).format(mfu=f"{mfu:g}", bound=f"{mfu_bound:.3f}")
        )
    return step_seconds * mfu_bound / mfu


def step_and_run(
    gpus: int,
    step_seconds: float,
    tokens_per_step: int,
    price_per_gpu_hour: float | None = None,
    tokens: int | None = None,
) -> dict:
    """Time and cost of one step and, with ``tokens``, of the whole run: a JSON-ready
    dict (what ``parallel --json`` prints under ``"cost"``). Seconds, GPU-hours,
    currency units of the price; the costs only with a price.

    Raises:
        ConfigError: a price `check_price` refuses, or tokens that are not a positive
        int."""
    out: dict = {
        "step_seconds": step_seconds,
        "step_gpu_hours": gpu_hours(gpus, step_seconds),
    }
    if price_per_gpu_hour is not None:
        out["price_per_gpu_hour"] = check_price(price_per_gpu_hour)
        out["step_cost"] = cost(gpus, step_seconds, price_per_gpu_hour)
    if tokens is not None:
        steps = steps_for(tokens, tokens_per_step)
        run_seconds = steps * step_seconds
        out |= {
            "tokens": tokens,
            "tokens_per_step": tokens_per_step,
            "steps": steps,
            "run_seconds": run_seconds,
            "run_days": run_seconds / 86400,
            "run_gpu_hours": gpu_hours(gpus, run_seconds),
        }
        if price_per_gpu_hour is not None:
            out["run_cost"] = cost(gpus, run_seconds, price_per_gpu_hour)
    return out
