#!/usr/bin/env bash
# keeplogs.sh STATE DEST: copy the test bed's logs (Slurm's daemons and
# MariaDB, the API servers, Kueue, kwok, Dex, Prometheus, the builds) from
# its state directory into DEST before make test stops it (slurm.sh down
# removes Slurm's directory, logs included) and removes it, so that a
# failed run can be read afterwards (a Slurm read that came back short under
# load, ci38 and ci45, left nothing to read: the state was gone).
set -euo pipefail
state=$1 dest=$2
rm -rf "$dest"
mkdir -p "$dest"
cd "$state"
find . -name '*.log' -size -64M -exec cp --parents {} "$dest" \;
echo "keeplogs.sh: the test bed's logs are kept in $dest"
