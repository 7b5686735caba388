"""Models by hub id (`llmmath.hub`): config.json from a Hugging Face cache folder built
here in the real layout, never the network; with huggingface_hub importable and with
it hidden, the same answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from llmmath import hub, presets
from llmmath.cli import main
from llmmath.counting import count_params
from tests.notebook_outputs import glued

MAIN = "a" * 40
DEV = "b" * 40
PR = "c" * 40
#: Several model types: Llama, Qwen2 (biases), Gemma 2 (sliding layers), Mixtral
#: (experts), DeepSeek-V3 (latent attention).
PRESETS = ["llama-3-8b", "qwen2.5-7b", "gemma-2-2b", "mixtral-8x7b", "deepseek-v3"]


def write_model(cache, repo_id: str, snapshots: dict, refs: dict) -> None:
    """``cache``/models--org--name as huggingface_hub writes it: blobs, snapshots whose
    config.json links to its blob, and refs holding a commit hash (no newline)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    for commit, text in snapshots.items():
        blob = repo / "blobs" / f"blob-{commit[:8]}"
        blob.write_text(text, encoding="utf-8")
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").symlink_to(
            os.path.join("..", "..", "blobs", blob.name)
        )
    for name, commit in refs.items():
        ref = repo / "refs" / name
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit, encoding="utf-8")


def config_text(name: str, **changes) -> str:
    return json.dumps({**presets.get(name).hf_config, **changes}, indent=2)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """HF_HOME with every preset of `PRESETS` as org/<preset> (main), and
    org/llama-3-8b also at a branch ``dev`` and ``refs/pr/1`` with fewer layers."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", hub.DOWNLOAD_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # whatever happens: never the network
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    cache = tmp_path / "hf" / "hub"
    for name in PRESETS[1:]:
        write_model(cache, f"org/{name}", {MAIN: config_text(name)}, {"main": MAIN})
    write_model(
        cache,
        "org/llama-3-8b",
        {
            MAIN: config_text("llama-3-8b"),
            DEV: config_text("llama-3-8b", num_hidden_layers=16),
            PR: config_text("llama-3-8b", num_hidden_layers=8),
        },
        {"main": MAIN, "dev": DEV, "refs/pr/1": PR},
    )
    work = tmp_path / "a" / "b" / "c"  # so that ../../etc names no folder
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return tmp_path


@pytest.fixture(params=["installed", "hidden"])
def hf(request, monkeypatch):
    """Each test twice: huggingface_hub importable, and hidden (the fallback reader)."""
    if request.param == "installed":
        pytest.importorskip("huggingface_hub")
    else:
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    return request.param


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def answer(capsys, *argv) -> dict:
    status, out, err = run(capsys, *argv, "--json")
    assert (status, err) == (0, "")
    report = json.loads(out)
    report.pop("model")
    return report


def refused(capsys, *argv) -> str:
    """The one line on stderr of a refusal (status 2, nothing on stdout)."""
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    assert err.startswith("llmmath: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("name", PRESETS)
def test_a_hub_id_counts_as_the_same_file_given_as_a_path(home, hf, capsys, name):
    path = home / "hf" / "hub" / f"models--org--{name}" / "snapshots" / MAIN
    by_path = answer(capsys, "params", str(path / "config.json"))
    assert answer(capsys, "params", f"org/{name}") == by_path
    assert by_path["total"] == answer(capsys, "params", name)["total"]


@pytest.mark.parametrize(
    "argv",
    [
        ["kv-cache", "--seq-len", "4096", "--batch", "2"],
        ["flops", "--seq-len", "2048"],
        ["memory", "--weights", "int4", "--gpu", "H100-SXM5-80GB"],
        ["parallel", "--gpus", "64", "--tp", "8"],
    ],
)
def test_every_model_command_takes_a_hub_id(home, hf, capsys, argv):
    path = home / "hf/hub/models--org--llama-3-8b/snapshots" / MAIN / "config.json"
    command, *options = argv
    by_path = answer(capsys, command, str(path), *options)
    assert answer(capsys, command, "org/llama-3-8b", *options) == by_path


@pytest.mark.parametrize(
    "revision, layers",
    [(None, 32), ("main", 32), ("dev", 16), (DEV, 16), ("refs/pr/1", 8), (PR, 8)],
)
def test_revision_picks_the_snapshot(home, hf, capsys, revision, layers):
    option = [] if revision is None else ["--revision", revision]
    status, out, err = run(capsys, "params", "org/llama-3-8b", *option, "--json")
    assert (status, err) == (0, "")
    report = json.loads(out)
    cfg = presets.load("llama-3-8b").replace(num_hidden_layers=layers)
    assert report["total"] == count_params(cfg).total
    shown = "org/llama-3-8b" + ("" if revision is None else f"@{revision}")
    assert report["model"] == shown


def test_hf_hub_cache_wins_over_the_older_name_and_hf_home(
    home, hf, capsys, monkeypatch
):
    cache = home / "hf" / "hub"
    monkeypatch.setenv("HF_HOME", str(home / "empty"))
    assert "not in the local hub cache" in refused(capsys, "params", "org/gpt2x")
    refused(capsys, "params", "org/qwen2.5-7b")  # HF_HOME's cache is empty
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(cache))
    assert answer(capsys, "params", "org/qwen2.5-7b")["total"] > 0
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "empty"))  # beats the older name
    refused(capsys, "params", "org/qwen2.5-7b")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE")
    assert answer(capsys, "params", "org/qwen2.5-7b")["total"] > 0


ENVIRONMENTS = [
    {},
    {"HF_HOME": "/h"},
    {"XDG_CACHE_HOME": "/x"},
    {"XDG_CACHE_HOME": "/x", "HF_HOME": "/h"},
    {"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy"},
    {"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HUB_CACHE": "/new"},
    {"HF_HUB_CACHE": "~/c"},
]


def test_the_cache_folder_is_huggingface_hubs(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HOME", str(tmp_path))  # what ~ means, here and there
    names = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME")
    base = {k: v for k, v in os.environ.items() if k not in names}
    base["HOME"] = str(tmp_path)
    for env in ENVIRONMENTS:
        theirs = subprocess.run(
            [
                sys.executable,
                "-c",
                "from huggingface_hub import constants as c\nprint(c.HF_HUB_CACHE)",
            ],
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert hub.hub_cache_dir({**base, **env}) == theirs, env


TRAVERSALS = [
    "../../etc",
    "/abs",
    "/etc/passwd/x",
    "org/name/../x",
    "org/../name",
    "../org/name",
    "org//name",
    "org/",
    "/name",
    "org/na me",
    "org/name\n",
    "org--x/name",
    "org/.hidden",
    "org/name-",
    "o\\rg/name",
    "org/" + "n" * 97,
    "cafe\u0301/name",
]


@pytest.mark.parametrize("model", TRAVERSALS)
def test_an_invalid_hub_id_gets_one_line(home, hf, capsys, model):
    assert "is no file, no preset and no hub id" in refused(capsys, "params", model)
    with pytest.raises(ValueError, match="a hub id is org/name"):
        hub.check_repo_id(model)


@pytest.mark.parametrize(
    "revision", ["../../x", "/abs", "-x", "dev/", "a//b", "main/../dev", "", "a b"]
)
def test_an_invalid_revision_gets_one_line(home, hf, capsys, revision):
    err = refused(capsys, "params", "org/llama-3-8b", f"--revision={revision}")
    assert "must be a commit hash or a branch or tag name" in err


def test_missing_model_and_revision_get_one_line(home, hf, capsys):
    err = refused(capsys, "params", "meta-llama/Llama-3.1-8B")
    assert "model 'meta-llama/Llama-3.1-8B' is not in the local hub cache" in err
    assert "LLMMATH_ALLOW_DOWNLOAD=1" in err
    err = refused(capsys, "params", "org/llama-3-8b", "--revision", "v9")
    assert (
        "revision 'v9' of model 'org/llama-3-8b' is not in the local hub cache" in err
    )
    assert "(cached: dev, main, refs/pr/1)" in err
    refused(capsys, "params", "org/llama-3-8b", "--revision", "d" * 40)


def test_revision_is_for_hub_ids_only(home, hf, capsys):
    err = refused(capsys, "params", "llama-3-8b", "--revision", "main")
    assert "--revision applies to a hub id (org/name), not to 'llama-3-8b'" in err
    status, out, err = run(
        capsys, "params", "org/llama-3-8b", "--revision", "a", "--revision", "b"
    )
    assert (status, out) == (2, "") and "--revision: given twice" in err


def test_a_local_path_wins_over_a_hub_id(home, hf, capsys):
    local = home / "a" / "b" / "c" / "org" / "llama-3-8b"
    local.parent.mkdir()
    local.write_text(config_text("llama-3-8b", num_hidden_layers=4), encoding="utf-8")
    assert answer(capsys, "params", "org/llama-3-8b") == answer(
        capsys, "params", str(local)
    )
    assert answer(capsys, "params", "org/llama-3-8b") != answer(
        capsys, "params", "llama-3-8b"
    )


def test_a_cached_config_goes_through_the_hardened_reader(home, hf, capsys):
    cache = home / "hf" / "hub"
    duplicate = '{"model_type": "llama", "hidden_size": 8, "hidden_size": 16}'
    write_model(cache, "org/dup", {MAIN: duplicate}, {"main": MAIN})
    write_model(cache, "org/big", {MAIN: " " * (10 * 10**6 + 1)}, {"main": MAIN})
    assert "hidden_size" in refused(capsys, "params", "org/dup")
    assert "over 10 MB" in refused(capsys, "params", "org/big")


def test_a_ref_that_holds_no_commit_is_not_followed(home, hf, capsys):
    write_model(home / "hf" / "hub", "org/odd", {MAIN: "{}"}, {"main": "../../x"})
    refused(capsys, "params", "org/odd")
    assert hub._cached_path("org/odd", "main", str(home / "hf" / "hub")) is None


@pytest.mark.parametrize(
    "held, says",
    [
        ("not-a-hash", "is corrupt: it holds 'not-a-hash', not a commit hash"),
        ("../../x", "is corrupt: it holds '../../x', not a commit hash"),
        (MAIN + "\n", f"is corrupt: it holds '{MAIN}\\n', not a commit hash"),
        ("", "is corrupt: it holds '', not a commit hash"),
        (b"\xff\xfe", "cannot be read (not UTF-8 text)"),
    ],
)
def test_a_corrupt_ref_is_named_as_corrupt(home, hf, capsys, held, says):
    """refs/main that holds no commit hash: the message says the ref is corrupt and
    where it is, never "revision 'main' is not in the cache (cached: main)" (issue
    34)."""
    write_model(home / "hf" / "hub", "org/odd", {MAIN: config_text("gpt2")}, {})
    ref = home / "hf" / "hub" / "models--org--odd" / "refs" / "main"
    ref.parent.mkdir()
    ref.write_bytes(held if isinstance(held, bytes) else held.encode())
    err = refused(capsys, "params", "org/odd")
    assert "refs/main of model 'org/odd' in the local hub cache " + says in err
    assert "delete that file, then set LLMMATH_ALLOW_DOWNLOAD=1" in err
    assert "cached:" not in err and "is not in the local hub cache" not in err


def test_a_ref_to_a_commit_that_is_not_cached_says_so(home, hf, capsys):
    write_model(home / "hf" / "hub", "org/gone", {}, {"main": DEV})
    err = refused(capsys, "params", "org/gone")
    assert (
        f"revision 'main' of model 'org/gone' is commit {DEV}, whose config.json is "
        "not in the local hub cache" in err
    )


# --- downloads: opt-in, mapped to one line; hf_hub_download is replaced, no network


@pytest.fixture
def fake_download(home, monkeypatch):
    """Let downloads happen, and make hf_hub_download write org/fetched's config."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    monkeypatch.setenv(hub.DOWNLOAD_ENV, "1")
    fake = SimpleNamespace(calls=[], error=None)

    def download(repo_id, filename, *, revision, cache_dir):
        fake.calls.append((repo_id, filename, revision, cache_dir))
        if repo_id != "org/fetched":
            raise fake.error
        write_model(cache_dir_path, repo_id, {MAIN: config_text("qwen3-0.6b")}, {})
        return str(cache_dir_path / "models--org--fetched/snapshots" / MAIN / filename)

    cache_dir_path = home / "hf" / "hub"
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return fake


def test_a_download_fetches_only_config_json(home, capsys, fake_download):
    total = answer(capsys, "params", "qwen3-0.6b")["total"]
    assert answer(capsys, "params", "org/fetched")["total"] == total
    assert fake_download.calls == [
        ("org/fetched", "config.json", "main", str(home / "hf" / "hub"))
    ]
    answer(capsys, "params", "org/llama-3-8b")  # cached: no download
    assert len(fake_download.calls) == 1


def _error(name):
    from huggingface_hub import errors

    cls = getattr(errors, name)
    return cls.__new__(cls, "the hub said no")


@pytest.mark.parametrize(
    "error, says",
    [
        ("GatedRepoError", "is gated"),
        ("RepositoryNotFoundError", "is not on the hub, or is private"),
        ("RevisionNotFoundError", "has no revision 'main' on the hub"),
        ("RemoteEntryNotFoundError", "has no config.json at revision 'main'"),
        ("LocalEntryNotFoundError", "no connection to the hub"),
        ("OfflineModeIsEnabled", "no connection to the hub"),
    ],
)
def test_a_failed_download_gets_one_line(home, capsys, fake_download, error, says):
    fake_download.error = _error(error)
    assert says in refused(capsys, "params", "meta-llama/Llama-3.1-8B")


def test_a_download_without_huggingface_hub_gets_one_line(home, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    monkeypatch.setenv(hub.DOWNLOAD_ENV, "1")
    err = refused(capsys, "params", "meta-llama/Llama-3.1-8B")
    assert "LLMMATH_ALLOW_DOWNLOAD=1 needs huggingface_hub" in err


@pytest.mark.parametrize("value, allowed", [("", False), ("0", False), ("1", True)])
def test_downloads_are_opt_in(value, allowed):
    assert hub.download_allowed({hub.DOWNLOAD_ENV: value}) is allowed
    assert hub.download_allowed({}) is False
    with pytest.raises(ValueError, match="LLMMATH_ALLOW_DOWNLOAD must be 1"):
        hub.download_allowed({hub.DOWNLOAD_ENV: "maybe"})


# --- huggingface_hub stays optional: never imported unless a hub id is asked for

HIDE = "import sys; sys.modules['huggingface_hub'] = None\n"
RUN = "from llmmath.cli import main\nstatus = main(sys.argv[1:])\n"


def python(code: str, *argv: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_import_and_a_preset_query_do_not_import_huggingface_hub():
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import llmmath"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "llmmath.config" in timed.stderr and "huggingface_hub" not in timed.stderr
    done = python(
        "import sys\n" + RUN + "assert 'huggingface_hub' not in sys.modules\n"
        "assert 'llmmath.hub' not in sys.modules\nsys.exit(status)",
        "params",
        "llama-3-8b",
        "--json",
    )
    assert done.returncode == 0, done.stderr


def test_with_and_without_huggingface_hub_the_same_answer(home):
    pytest.importorskip("huggingface_hub")
    env = {**os.environ}
    outputs = []
    for hide in ("", HIDE):
        code = (
            "import sys\n"
            + hide
            + RUN
            + (
                "assert (sys.modules.get('huggingface_hub') is not None) == "
                f"{not hide}\nsys.exit(status)"
            )
        )
        for argv in (
            ["params", "org/llama-3-8b", "--json"],
            ["kv-cache", "org/gemma-2-2b", "--seq-len", "9000", "--json"],
            ["params", "org/llama-3-8b", "--revision", "dev", "--json"],
            ["params", "org/llama-3-8b", "--revision", "v9"],
            ["params", "org/nope"],
        ):
            done = python(code, *argv, env=env)
            outputs.append((done.returncode, done.stdout, done.stderr))
    half = len(outputs) // 2
    assert outputs[:half] == outputs[half:]
    assert [status for status, _, _ in outputs[:half]] == [0, 0, 0, 2, 2]


# --- chapter 13, "A model by its hub id" ----------------------------------------------

CHAPTER_13 = Path(__file__).resolve().parents[1] / "chapters" / "13_zoo.ipynb"


def test_chapter_13_cache_layout_counts_as_the_preset(
    tmp_path, monkeypatch, hf, capsys
):
    """Chapter 13 builds the cache with plain files (no blobs, no links): refs/main
    holding a commit hash, snapshots/<commit>/config.json. Both readers follow it, and
    the hub id's count is Meta's published 8,030,261,248 for Llama 3 8B."""
    for var in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", hub.DOWNLOAD_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    folder = tmp_path / "models--meta-llama--Meta-Llama-3-8B"
    snapshot = folder / "snapshots" / MAIN
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(config_text("llama-3-8b"), encoding="utf-8")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(MAIN, encoding="utf-8")
    by_id = answer(capsys, "params", "meta-llama/Meta-Llama-3-8B")
    assert by_id == answer(capsys, "params", "llama-3-8b")
    assert by_id["total"] == 8_030_261_248
    err = refused(capsys, "params", "meta-llama/Llama-3.1-8B")
    assert f"is not in the local hub cache ({tmp_path})" in err
    assert "LLMMATH_ALLOW_DOWNLOAD=1" in err


def test_chapter_13_shows_the_count_and_the_one_line():
    g = glued(CHAPTER_13)
    assert g["zoo_hub_total"] == "8,030,261,248"
    cells = json.loads(CHAPTER_13.read_text(encoding="utf-8"))["cells"]
    shown = {
        c["id"]: "".join("".join(o["text"]) for o in c["outputs"] if "text" in o)
        for c in cells
        if c["cell_type"] == "code" and c["id"].startswith("zoo-hub-")
    }
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert shown["zoo-hub-cache"].splitlines() == [
        "models--meta-llama--Meta-Llama-3-8B/refs/main",
        f"models--meta-llama--Meta-Llama-3-8B/snapshots/{commit}/config.json",
    ]
    assert "the same params report as the preset's: True" in shown["zoo-hub-count"]
    (line,) = shown["zoo-hub-missing"].splitlines()
    assert line == (
        "model 'meta-llama/Llama-3.1-8B' is not in the local hub cache (<cache>); set "
        "LLMMATH_ALLOW_DOWNLOAD=1 to fetch its config.json, or run "
        "`hf download meta-llama/Llama-3.1-8B config.json`"
    )
    markdown = " ".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    assert "(zoo-hub-id)=" in markdown
    calculator = CHAPTER_13.parents[1] / "book" / "calculator.ipynb"
    assert "{ref}`zoo-hub-id`" in calculator.read_text(encoding="utf-8")
