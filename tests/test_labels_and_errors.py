"""Binary labels of any type (``pos_label``) and errors that say what they found."""

import json

import numpy as np
import pytest

import mlcal
from mlcal.cli import main
from mlcal.labels import MissingLabelError, describe_labels, to_binary


@pytest.mark.parametrize("labels,pos,expected", [
    (["yes", "no", "yes", "no"], "yes", [1, 0, 1, 0]),
    (["yes", "no", "yes", "no"], "no", [0, 1, 0, 1]),
    ([True, False, False], None, [1, 0, 0]),
    ([True, False, False], False, [0, 1, 1]),
    ([0, 1, 1], None, [0, 1, 1]),
    ([1.0, 0.0], None, [1, 0]),
    ([2, 7, 7], 7, [0, 1, 1]),
    (np.array(["b", "a"], dtype=object), "a", [0, 1]),
])
def test_to_binary_maps_the_positive_class_to_one(labels, pos, expected):
    out = to_binary(labels, pos)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("labels,pos,needles", [
    (["maybe", "no", "yes"], "yes", ["two classes", "['maybe', 'no', 'yes'] (3 labels)", "3 rows"]),
    (["no", "yes"], None, ["['no', 'yes']", "pos_label"]),
    (["no", "yes"], "y", ["'y'", "['no', 'yes']"]),
    (["1", 1], None, ["[1, '1']", "not 0/1"]),   # "1" is not 1: two labels, not 0/1
    (["yes", "yes"], "yes", ["['yes'] (1 label)"]),
])
def test_to_binary_errors_list_the_labels_found(labels, pos, needles):
    with pytest.raises(ValueError) as info:
        to_binary(labels, pos, name="column 'y' of data.csv")
    message = str(info.value)
    assert "column 'y' of data.csv" in message or "pos_label" in message
    for needle in needles:
        assert needle in message, message


def test_to_binary_refuses_missing_labels():
    with pytest.raises(MissingLabelError, match="1 of 3 labels are missing"):
        to_binary(["a", None, "b"], "a")


def test_describe_labels_counts_and_truncates():
    assert describe_labels(["b", "a", "b"]) == "['a', 'b'] (2 labels)"
    text = describe_labels(np.arange(50))
    assert text.endswith("(50 labels)") and ", ...]" in text


def test_calibrator_fit_names_the_string_labels_it_got():
    with pytest.raises(ValueError, match=r"found \['no', 'yes'\] \(2 labels\).*to_binary"):
        mlcal.get_calibrator("platt").fit([0.1, 0.9], ["no", "yes"])


def _csv(path, rows):
    path.write_text("s,y\n" + "".join(f"{s},{y}\n" for s, y in rows))
    return str(path)


def test_cli_pos_label_fits_the_same_calibrator_as_zero_one_labels(tmp_path):
    rng = np.random.default_rng(1)
    s = np.round(rng.random(300), 6)
    y = (rng.random(300) < s).astype(int)
    words = _csv(tmp_path / "words.csv", zip(s, np.where(y == 1, "yes", "no")))
    flipped = _csv(tmp_path / "flipped.csv", zip(s, np.where(y == 1, "no", "yes")))
    ints = _csv(tmp_path / "ints.csv", zip(s, y))
    outs = {}
    for name, data, pos in (("w", words, "yes"), ("f", flipped, "no"), ("i", ints, None),
                            ("i1", ints, "1")):
        args = ["fit", "--method", "platt", "--data", data, "--score-column", "s",
                "--out", str(tmp_path / f"{name}.json")]
        assert main(args + (["--pos-label", pos] if pos else [])) == 0
        outs[name] = (tmp_path / f"{name}.json").read_bytes()
    assert outs["w"] == outs["f"] == outs["i"] == outs["i1"]
    # evaluate takes the same option
    assert main(["evaluate", "--calibrator", str(tmp_path / "w.json"), "--data", words,
                 "--score-column", "s", "--pos-label", "yes", "--json"]) == 0


def test_cli_errors_name_the_labels_the_column_and_the_file(tmp_path, capsys):
    three = _csv(tmp_path / "data.csv", [(0.1, "no"), (0.5, "maybe"), (0.9, "yes")])
    out = str(tmp_path / "o.json")
    assert main(["fit", "--data", three, "--score-column", "s", "--pos-label", "yes",
                 "--out", out]) == 2
    err = capsys.readouterr().err
    assert "found ['maybe', 'no', 'yes'] (3 labels)" in err and "'y'" in err and three in err
    two = _csv(tmp_path / "two.csv", [(0.1, "no"), (0.9, "yes")])
    assert main(["fit", "--data", two, "--score-column", "s", "--out", out]) == 2
    assert "--pos-label" in capsys.readouterr().err
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert main(["fit", "--data", str(empty), "--out", out]) == 2
    assert f"{empty} is empty" in capsys.readouterr().err
    header = tmp_path / "header.csv"
    header.write_text("score,y\n")
    assert main(["fit", "--data", str(header), "--out", out]) == 2
    err = capsys.readouterr().err
    assert f"{header} has a header" in err and "no data rows" in err


def test_auto_on_five_rows_falls_back_to_its_first_candidate_and_says_why():
    s = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    y = np.array([0, 0, 1, 0, 1])
    with pytest.warns(UserWarning, match=r"no 5-fold cross-validation possible on 5 rows"):
        cal = mlcal.get_calibrator("auto").fit(s, y)
    # the first candidate: temperature scaling on the 0/1 labels (auto's parameters)
    assert cal.chosen_ == "temperature"
    assert "5 rows" in cal.selection_["reason"] and "temperature" in cal.selection_["reason"]
    assert all(r["status"] == "not cross-validated" for r in cal.selection_["candidates"])
    first = mlcal.get_calibrator("temperature", smooth_targets=False).fit(s, y)
    assert json.loads(cal.to_json())["map"] == json.loads(first.to_json())["map"]
