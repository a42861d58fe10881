// SPDX-License-Identifier: MIT
// dlock/dlock.h: the whole public API in one include (but <dlock/async.h>, which needs asio).
#pragma once

#include <dlock/client.h>
#include <dlock/errc.h>
#include <dlock/fenced_store.h>
#include <dlock/lease.h>
#include <dlock/mutex.h>
#include <dlock/observer.h>
#include <dlock/options.h>
#include <dlock/prometheus.h>
#include <dlock/result.h>
#include <dlock/semaphore.h>
#include <dlock/shared_mutex.h>
#include <dlock/status.h>
#include <dlock/types.h>
#include <dlock/version.h>
