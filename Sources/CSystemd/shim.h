// The parts of libsystemd blueskyd uses: readiness and watchdog notification, socket
// activation, and structured journal entries. sd_journal_send() is variadic and cannot be
// called from Swift; sd_journal_sendv() takes the same fields as an iovec array.
#ifndef BLUESKYD_CSYSTEMD_SHIM_H
#define BLUESKYD_CSYSTEMD_SHIM_H

#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#endif
