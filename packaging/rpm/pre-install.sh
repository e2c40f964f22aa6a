# dockhand %pre: the dockhand system user.
getent group dockhand >/dev/null || groupadd -r dockhand
getent passwd dockhand >/dev/null || \
    useradd -r -g dockhand -d /var/lib/dockhand -s /sbin/nologin -c "Dockhand node agent" dockhand
exit 0
