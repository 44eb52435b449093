// FunctionRef: a callable passed down a call without being copied.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace thd::detail {

// A non-owning reference to a callable, for passing a lambda down a call without the
// heap allocation std::function makes for a capturing one. It must not outlive the
// callable it refers to: take it as a parameter, never store it.
template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
             std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): stands in for the callable
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* c, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(c))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

 private:
  void* callable_;
  R (*call_)(void*, Args...);
};

}  // namespace thd::detail
