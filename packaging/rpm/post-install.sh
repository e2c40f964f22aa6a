# dockhand %post: the work directory; on upgrade ($1 = 2), restart the agents that run in
# place (their driver sessions and blocks are kept).
mkdir -p /var/lib/dockhand
chown dockhand:dockhand /var/lib/dockhand
chmod 0711 /var/lib/dockhand
chgrp dockhand /etc/dockhand /etc/dockhand/agent.json
chmod 0750 /etc/dockhand
chmod 0640 /etc/dockhand/agent.json
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 2 ]; then
        /usr/lib/dockhand/dockhand-restart-in-place >/dev/null 2>&1 || :
    fi
fi
exit 0
