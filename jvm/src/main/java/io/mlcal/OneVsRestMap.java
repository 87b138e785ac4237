package io.mlcal;

import java.util.List;
import java.util.Map;

/**
 * One-vs-rest multiclass map ({@code "multiclass-ovr"}): column k goes through class map k
 * (any binary map, each with its own input transform), then every row is divided by its sum;
 * a row whose classes all map to 0 gets the uniform distribution 1/K.
 */
public final class OneVsRestMap extends MultiMap {
    private static final java.util.Set<String> MULTICLASS_KINDS =
            java.util.Set.of("multiclass-ovr", "softmax-affine");
    private static final String KIND = "multiclass-ovr";
    private static final String[] NORMALISATIONS = {"sum"};
    private final BinaryMap[] maps;

    OneVsRestMap(BinaryMap[] maps) {
        super(KIND);
        if (maps.length < 2) {
            throw new MapFormatException(KIND + " map: needs at least 2 class maps, got "
                    + maps.length);
        }
        this.maps = maps;
    }

    static OneVsRestMap fromDoc(Map<String, Object> doc, String where, Maps.Common common) {
        Object raw = doc.get("maps");
        if (!(raw instanceof List)) {
            throw new MapFormatException(where + ": field 'maps' must be a list of map documents");
        }
        List<?> docs = (List<?>) raw;
        BinaryMap[] maps = new BinaryMap[docs.size()];
        for (int k = 0; k < maps.length; k++) {
            Object sub = docs.get(k);
            Object type = sub instanceof Map ? ((Map<?, ?>) sub).get("type") : null;
            CalibrationMap m = null;
            if (!(type instanceof String) || !MULTICLASS_KINDS.contains(type)) {
                try {
                    m = Maps.fromDoc(sub);
                } catch (MapFormatException e) {
                    throw new MapFormatException(where + ": class map " + k + ": "
                            + e.getMessage());
                }
            }
            if (!(m instanceof BinaryMap)) {
                throw new MapFormatException(where + ": class map " + k
                        + " must be a binary map");
            }
            maps[k] = (BinaryMap) m;
        }
        String norm = Maps.choiceField(doc, "normalisation", where, NORMALISATIONS);
        common.requireUnset(KIND);
        OneVsRestMap out = new OneVsRestMap(maps);
        Maps.checkChoice(norm, "normalisation", where, NORMALISATIONS);
        return out;
    }

    @Override
    public int nClasses() {
        return maps.length;
    }

    @Override
    void predictRow(double[] s, int off, double[] out, int outOff, double[] q) {
        int nk = maps.length;
        for (int k = 0; k < nk; k++) {
            q[k] = maps[k].transformAndEvaluate(s[off + k]);
        }
        double total = rowSum(q, 0, nk);
        for (int k = 0; k < nk; k++) {
            out[outOff + k] = total > 0.0 ? q[k] / total : 1.0 / nk;
        }
    }
}
