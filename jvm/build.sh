#!/usr/bin/env bash
# Build mlcal-calibrator.jar with the JDK's javac and jar only (no downloads, no build tool).
# Usage: jvm/build.sh [OUT_DIR]   (default OUT_DIR: jvm/build; JAVA_HOME/bin is used when set)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/build}"
bin="${JAVA_HOME:+$JAVA_HOME/bin/}"
rm -rf "$out/classes"
mkdir -p "$out/classes"
find "$here/src/main/java" -name '*.java' -print0 | sort -z \
  | xargs -0 "${bin}javac" --release 11 -Xlint:all -encoding UTF-8 -d "$out/classes"
cp -R "$here/src/main/resources/." "$out/classes/"   # methods.json: mlcal's method table
"${bin}jar" --create --file "$out/mlcal-calibrator.jar" --main-class io.mlcal.Main \
  -C "$out/classes" .
echo "$out/mlcal-calibrator.jar"
