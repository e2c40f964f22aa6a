# dockhand %preun: on erase ($1 = 0), stop and disable the agents.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now dockhand.service >/dev/null 2>&1 || :
    systemctl stop 'dockhand@*.service' >/dev/null 2>&1 || :
fi
exit 0
