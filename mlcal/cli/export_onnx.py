"""``mlcal export-onnx``: turn a calibrator JSON file into an ONNX graph."""

from __future__ import annotations

from pathlib import Path


def run(args) -> int:
    from mlcal._atomic import check_new_path
    from mlcal.calibrators.base import load_calibrator
    from mlcal.onnx import error_bound, save, to_onnx

    check_new_path(args.out, overwrite=args.force)   # fail before doing any work
    cal = load_calibrator(Path(args.calibrator))   # a path, never JSON text
    model = to_onnx(cal, dtype=args.dtype, opset=args.opset)
    save(model, args.out, overwrite=args.force)
    m = cal.map_
    if m.kind == "multicalibration":   # the score and segment features in; a per-row bound
        print(f"exported {type(cal).__name__} ({len(m.trees)} trees, {m.size} nodes) as float64, "
              f"opset {args.opset}: inputs 'scores' [N] and one [N] input per feature "
              f"({', '.join(m.feature_names) or 'none'}), outputs 'p_calibrated' [N] and "
              "'tree_leaves' [N, T]; tree routing identical to predict, probabilities within "
              "mlcal.multicalibration.onnx_export.error_bound")
        print(f"saved {args.out}")
        return 0
    bound = error_bound(m, args.dtype)
    exact = "bit-identical to predict" if bound == 0 else f"within {bound:.2g} of predict"
    k = getattr(m, "n_classes", None)   # multiclass maps: [N, K] in and out
    if k is None:
        shapes = f"input transform {m.input_transform}) as {args.dtype}, opset {args.opset}: " \
                 "input 'scores' [N], output 'p_calibrated' [N]"
    else:
        shapes = f"{k} classes) as {args.dtype}, opset {args.opset}: input 'scores' [N, {k}], " \
                 f"output 'p_calibrated' [N, {k}]"
        if bound >= 1.0:
            exact = "no useful error bound over all inputs (see mlcal.onnx.error_bound)"
    print(f"exported {type(cal).__name__} ({m.kind} map of size {m.size}, {shapes}, {exact}")
    print(f"saved {args.out}")
    return 0


def register(sub) -> None:
    from mlcal.onnx import DEFAULT_OPSET, DTYPES

    p = sub.add_parser("export-onnx", help="export a fitted calibrator (JSON) to ONNX",
                       description="Write an ONNX graph (standard operators only) mapping scores "
                                   "[N] to calibrated probabilities [N]. NaN or infinite scores "
                                   "give NaN. A multiclass calibrator maps scores [N, K] (K "
                                   "read from its map) to probabilities [N, K]; a row with a "
                                   "NaN or infinite score gives a NaN row.")
    p.add_argument("--calibrator", required=True, help="calibrator JSON written by `mlcal fit`")
    p.add_argument("--out", required=True, help="where to write the .onnx file")
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                   help=f"ai.onnx opset version (default: {DEFAULT_OPSET})")
    p.add_argument("--dtype", choices=DTYPES, default="float64",
                   help="input/compute dtype (default: float64, exact)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(handler=run)
