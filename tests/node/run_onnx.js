// Runs ONNX models in onnxruntime-node: a third runtime for tests/test_onnx.py.
//
// Usage: node run_onnx.js jobs.json
// jobs.json: {"cases": [{"model": "m.onnx", "out": "prefix",
//                        "inputs": {"scores": {"file": "x.bin", "dtype": "float64", "shape": [n]}}}]}
// Inputs are raw little-endian arrays; each output is written to "<out>.<name>.bin" (raw bytes,
// strings as JSON) and "<out>.json" lists name, dtype and dims. Bytes are copied unchanged, so
// NaN payloads and signed zeros survive for bit-exact comparison in Python.
"use strict";

const fs = require("fs");
const ort = require("onnxruntime-node");

const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int32: Int32Array,
  int64: BigInt64Array,
};

function readTensor(spec) {
  const buf = fs.readFileSync(spec.file);
  const Ctor = ARRAYS[spec.dtype];
  const data = new Ctor(buf.buffer, buf.byteOffset, buf.byteLength / Ctor.BYTES_PER_ELEMENT);
  return new ort.Tensor(spec.dtype, data, spec.shape);
}

async function main() {
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const options = { executionProviders: ["cpu"], intraOpNumThreads: 1 };
  for (const job of jobs.cases) {
    const session = await ort.InferenceSession.create(job.model, options);
    const feeds = {};
    for (const [name, spec] of Object.entries(job.inputs)) feeds[name] = readTensor(spec);
    const results = await session.run(feeds);
    const summary = [];
    for (const [name, tensor] of Object.entries(results)) {
      const file = `${job.out}.${name}.bin`;
      if (tensor.type === "string") {
        fs.writeFileSync(file, JSON.stringify(Array.from(tensor.data)));
      } else {
        const d = tensor.data;
        fs.writeFileSync(file, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
      }
      summary.push({ name, dtype: tensor.type, dims: tensor.dims, file });
    }
    fs.writeFileSync(`${job.out}.json`, JSON.stringify(summary));
    if (typeof session.release === "function") await session.release();
  }
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
