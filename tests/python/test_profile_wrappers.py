"""bench/profile_wrappers.py's command line, where no GPU is needed: its arguments and its
refusal without PyTorch or a GPU (the profile itself runs on the GPU machine)."""

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import profile_wrappers  # noqa: E402


def test_arguments():
    args = profile_wrappers.parse_args(["--shape", "4096x32768", "--only", "softmax",
                                        "--calls", "5"])
    assert args.shape == (4096, 32768) and args.only == ("softmax",) and args.calls == 5
    assert profile_wrappers.parse_args([]).only == profile_wrappers.WRAPPERS


@pytest.mark.parametrize("argv", [["--shape", "4096"], ["--shape", "0x10"],
                                  ["--only", "matmul"], ["--calls", "0"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as e:
        profile_wrappers.parse_args(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_refuses_without_a_gpu(capsys):
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is visible: the profile would run")
    except ImportError:
        pass
    assert profile_wrappers.main(["--calls", "1"]) == 2
    assert "profile_wrappers:" in capsys.readouterr().err
