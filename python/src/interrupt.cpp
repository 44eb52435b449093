// Ctrl-C during a wait: thd's blocking calls run with the GIL released, so Python's
// signal handler only sets a flag that nothing looks at until the call returns,
// which for a synchronize behind minutes of queued work is minutes. The check
// installed here (thd/interrupt.h) runs in the waits every 100 ms; in the main
// thread, the only one Python delivers signals to, it takes the GIL and runs the
// pending handlers, and a handler's exception (KeyboardInterrupt) ends the wait.
#include <thd/interrupt.h>

#include "bindings.h"

namespace thd::python {

namespace {

unsigned long g_main_thread = 0;  // threading.main_thread().ident

void check_python_signals() {
  // PyThread_get_thread_ident needs no GIL (pthread_self).
  if (PyThread_get_thread_ident() != g_main_thread) return;
  // At interpreter exit the atexit hook has removed the check; a wait inside
  // finalization itself must not take the GIL back.
#if PY_VERSION_HEX >= 0x030D0000
  if (Py_IsFinalizing()) return;
#else
  if (_Py_IsFinalizing()) return;
#endif
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace

void bind_interrupts(py::module_& m) {
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  set_interrupt_check(&check_python_signals);
  m.def("_remove_interrupt_check", [] { set_interrupt_check(nullptr); },
        "Removes the Ctrl-C check from thd's waits (at interpreter exit).");
}

}  // namespace thd::python
