// The whole public API of thd.
#pragma once

#include <thd/config.h>
#include <thd/datachannel.h>
#include <thd/device.h>
#include <thd/distributed.h>
#include <thd/dtype.h>
#include <thd/error.h>
#include <thd/generator.h>
#include <thd/graph.h>
#include <thd/half.h>
#include <thd/interrupt.h>
#include <thd/memory.h>
#include <thd/object_collectives.h>
#include <thd/process_group.h>
#include <thd/scalar.h>
#include <thd/storage.h>
#include <thd/stream.h>
#include <thd/store.h>
#include <thd/tensor.h>
