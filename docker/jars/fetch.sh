#!/bin/sh
# fetch.sh OUT_DIR GROUP:ARTIFACT:VERSION[:jar:CLASSIFIER]...
#
# The images' jars, fetched by Maven (whatever repository its settings.xml names: Maven Central,
# a mirror, a proxy) rather than from a URL written into a Dockerfile, then checked against
# SHA256SUMS beside this script: a jar without its line there, or with other bytes, fails the
# build. The Dockerfiles run it in a `jars` stage (maven image) and copy the checked jars out;
# tests/unit/test_docker_images.py runs it here too.
set -eu
out=$1
shift
sums=$(cd "$(dirname "$0")" && pwd)/SHA256SUMS
mkdir -p "$out"
for artifact in "$@"; do
    mvn -B -q -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact="$artifact" -DoutputDirectory="$out" -Dmdep.overWriteReleases=true
done
cd "$out"
wanted=$(mktemp)
trap 'rm -f "$wanted"' EXIT
for jar in *.jar; do
    grep -E "^[0-9a-f]{64}  $jar\$" "$sums" >> "$wanted" || { echo "fetch.sh: no checksum for $jar in $sums" >&2; exit 1; }
done
sha256sum --check --strict "$wanted"
