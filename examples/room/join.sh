#!/bin/sh
# One join of the room from the shell, under the fencelock command:
#
#   SG=127.0.0.1:8080 fencelock run --ttl 1s --wait 25s room-1 -- sh join.sh client-07
#
# fencelock holds the lock `room-1` while this runs and gives it the token in
# FENCELOCK_TOKEN. The join reads the room with the token (a fenced read),
# and if there is room, sends one storage-guard batch with the token: put the
# room with the count plus one if it is still at the version read, and create
# the player. Exit status: 0 joined, 1 full, 2 refused as stale (409),
# 3 refused by the version check (412), 5 any other error.
# Needs curl; the answer is taken apart with the shell's own ${x#...}, so a
# turn under the lock costs two curl processes and nothing else. Player names
# are plain words (no quotes or brackets).
set -u
name=${1:?usage: join.sh NAME}
sg=${SG:?SG=host:port of storage-guard}
token=${FENCELOCK_TOKEN:?run me under fencelock run}

# Head and body, then " STATUS" at the end.
resp=$(curl -s -m 10 -i -w ' %{http_code}' "http://$sg/v1/records/room-1?token=$token") || exit 5
case ${resp##* } in
  200)
    v=${resp#*[Ee][Tt][Aa][Gg]: \"}
    version=${v%%\"*}
    c=${resp#*\"count\":}
    count=${c%%[!0-9]*}
    m=${resp#*\"members\":\[}
    members=${m%%\]*} ;;
  404) version=0 count=0 members='' ;; # no room record yet: empty
  409) exit 2 ;;
  *) exit 5 ;;
esac
case $version$count in '' | *[!0-9]*) exit 5 ;; esac
[ -n "$version" ] && [ -n "$count" ] || exit 5
[ "$count" -lt 3 ] || exit 1

members="${members:+$members,}\"$name\""
body='{"token":'$token',"ops":[
  {"op":"put","key":"room-1","value":{"count":'$((count + 1))',"members":['$members']},"if_version":'$version'},
  {"op":"put","key":"room-1/players/'$name'","resource":"room-1","value":{"name":"'$name'"},"if_version":0}]}'
status=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data-binary "$body" "http://$sg/v1/batch") || exit 5
case $status in
  200) exit 0 ;;
  409) exit 2 ;;
  412) exit 3 ;;
  *) exit 5 ;;
esac
