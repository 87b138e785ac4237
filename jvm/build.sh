#!/usr/bin/env bash
# Build jvm/build/mlcal-calibrator.jar with the JDK's javac and jar only (no downloads, no
# build tool). Usage: jvm/build.sh   (from anywhere; JAVA_HOME/bin is used when set)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${JAVA_HOME:+$JAVA_HOME/bin/}"
rm -rf "$here/build/classes"
mkdir -p "$here/build/classes"
find "$here/src/main/java" -name '*.java' -print0 | sort -z \
  | xargs -0 "${bin}javac" --release 11 -Xlint:all -Werror -encoding UTF-8 \
      -d "$here/build/classes"
"${bin}jar" --create --file "$here/build/mlcal-calibrator.jar" --main-class io.mlcal.Main \
  -C "$here/build/classes" .
echo "$here/build/mlcal-calibrator.jar"
