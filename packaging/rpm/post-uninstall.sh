# dockhand %postun: on erase ($1 = 0), remove the work directory, leftover config and the user.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 0 ]; then
    rm -rf /var/lib/dockhand /etc/dockhand
    getent passwd dockhand >/dev/null && userdel dockhand >/dev/null 2>&1 || :
    getent group dockhand >/dev/null && groupdel dockhand >/dev/null 2>&1 || :
fi
exit 0
