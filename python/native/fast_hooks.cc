// flopscope_torch._native: the hot paths of flopscope_torch's module hooks (module_hooks.py), in
// C++ so that a module call costs little more than PyTorch's own hook dispatch.
//
// What is here mirrors the pure-Python fast paths in ModuleHooks._fast_hooks and
// ModuleHooks.on_gradient step by step, and hands every unusual case to the Python code it was
// given (slow_pre, slow_post, push_backward, ...), exactly where the Python fast path does.
// Without this module (another Python, no python3-dev at build time, FLOPSCOPE_TORCH_NATIVE=0)
// the package runs the Python fast paths, with the same behaviour.
//
//   nvtx_push(bytes) / nvtx_pop()  a range in NVTX's default domain (this library's own NVTX
//                                  instance, routed to the tool named by NVTX_INJECTION64_PATH)
//   Hooks(config)                  pre(module, inputs) and post(module, inputs, output): the
//                                  global forward hooks; config is a dict (see HooksNew)
//   GradEvents(hooks)              the one gradient hook per tensor: `closes` and `opens` lists
//                                  of forward entries; calling it brackets backward ranges
//
// Hazards: every call runs with the GIL held (PyTorch calls hooks with it, and nothing here
// releases it), so the Python objects touched are never shared mid-update. An exception raised
// inside a hook goes to config["fail"] (which turns the package off) as the Python hooks'
// `except Exception` does; anything that is not an Exception propagates. The attribute names
// read here (Names, ResolveSlots) are those of thread_ranges.Entry / ThreadState and
// module_registry.ModuleInfo: renaming one there means renaming it here (test_native_hooks
// compares both paths call by call).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <nvtx3/nvToolsExt.h>
#include <structmember.h>

#include <cstdint>

namespace {

// Bumped when a function's meaning or signature changes; the package refuses another version.
constexpr int kNativeAbiVersion = 2;
// Fast-path results: done, or "hand this call to the Python slow path".
constexpr int kDone = 0;
constexpr int kSlow = 1;

// Attribute names, interned once at import.
struct Names {
  PyObject* state;
  PyObject* entries;
  PyObject* transparent;
  PyObject* ref;
  PyObject* sites;
  PyObject* encoded;
  PyObject* backward;
  PyObject* parent;
  PyObject* announced;
  PyObject* info;
  PyObject* path;
  PyObject* source;
  PyObject* back;
  PyObject* backward_hooks;
  PyObject* requires_grad;
  PyObject* grad_fn;
  PyObject* register_hook_dict;
  PyObject* closes;
  PyObject* opens;
  PyObject* end_queued;
  PyObject* stale;
};
Names g_names;

// An owned reference, released at scope exit.
class Ref {
 public:
  explicit Ref(PyObject* object = nullptr) : object_(object) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(object_); }
  PyObject* get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }
  void reset(PyObject* object) {
    Py_XDECREF(object_);
    object_ = object;
  }

 private:
  PyObject* object_;
};

// A borrowed reference held for the scope (the list it came from may change meanwhile).
PyObject* Hold(PyObject* object) {
  Py_XINCREF(object);
  return object;
}

// -1 error, 0 false, 1 true; bools and None without a call.
int Truth(PyObject* value) {
  if (value == Py_True) return 1;
  if (value == Py_False || value == Py_None) return 0;
  return PyObject_IsTrue(value);
}

// One __slots__ attribute of one class (Entry, ModuleInfo, ThreadState), read straight from the
// object's slot when the object is of exactly that class; by name otherwise, or when the slot is
// empty (then getattr raises AttributeError as Python would).
struct Slot {
  PyTypeObject* type = nullptr;  // borrowed: the Hooks object holds the class
  Py_ssize_t offset = -1;
  PyObject* name = nullptr;  // interned
};

PyObject* Get(const Slot& slot, PyObject* object) {
  if (Py_TYPE(object) == slot.type) {
    PyObject* value = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(object) + slot.offset);
    if (value != nullptr) return Hold(value);
  }
  return PyObject_GetAttr(object, slot.name);
}

int TruthOf(const Slot& slot, PyObject* object) {
  Ref value(Get(slot, object));
  return value ? Truth(value.get()) : -1;
}

// Finds `name`'s slot in `type` (a class with __slots__); leaves `slot` reading by name when
// `type` has no such writable object slot.
void Resolve(PyObject* type, PyObject* name, Slot* slot) {
  slot->name = name;
  if (!PyType_Check(type)) return;
  Ref descriptor(PyObject_GetAttr(type, name));
  if (!descriptor) {
    PyErr_Clear();
    return;
  }
  if (Py_TYPE(descriptor.get()) != &PyMemberDescr_Type) return;
  PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descriptor.get())->d_member;
  if (member->type != T_OBJECT_EX || (member->flags & READONLY) != 0) return;
  slot->type = reinterpret_cast<PyTypeObject*>(type);
  slot->offset = member->offset;
}

// One attribute of torch.Tensor that is a C getter/setter (grad_fn, requires_grad,
// _backward_hooks), called directly on exact tensors: a data descriptor, so this is what getattr
// would do, without the type lookup. By name where the attribute is not such a descriptor.
struct TensorAttr {
  PyGetSetDef* def = nullptr;
  PyObject* name = nullptr;  // interned
};

PyObject* Get(const TensorAttr& attr, PyObject* tensor) {
  if (attr.def != nullptr && attr.def->get != nullptr) {
    return attr.def->get(tensor, attr.def->closure);
  }
  return PyObject_GetAttr(tensor, attr.name);
}

int Set(const TensorAttr& attr, PyObject* tensor, PyObject* value) {
  if (attr.def != nullptr && attr.def->set != nullptr) {
    return attr.def->set(tensor, value, attr.def->closure);
  }
  return PyObject_SetAttr(tensor, attr.name, value);
}

void Resolve(PyObject* type, PyObject* name, TensorAttr* attr) {
  attr->name = name;
  if (!PyType_Check(type)) return;
  Ref descriptor(PyObject_GetAttr(type, name));
  if (!descriptor) {
    PyErr_Clear();
    return;
  }
  if (Py_TYPE(descriptor.get()) != &PyGetSetDescr_Type) return;
  attr->def = reinterpret_cast<PyGetSetDescrObject*>(descriptor.get())->d_getset;
}

// `del entries[-1]` of a non-empty list, as list.pop does it (no slice object, no resize).
void PopLast(PyObject* list) {
  Py_ssize_t size = PyList_GET_SIZE(list);
  PyObject* last = PyList_GET_ITEM(list, size - 1);
  Py_SET_SIZE(list, size - 1);
  Py_DECREF(last);
}

// The object a weak reference points to (None when dead), or what calling `ref` returns.
PyObject* Referent(PyObject* ref) {
  if (PyWeakref_CheckRefExact(ref)) return Hold(PyWeakref_GET_OBJECT(ref));
  return PyObject_CallNoArgs(ref);
}

// ---- NVTX ----

int NvtxPushBytes(PyObject* encoded) {
  if (!PyBytes_Check(encoded)) {
    PyErr_Format(PyExc_TypeError, "nvtx_push takes bytes, not %.100s", Py_TYPE(encoded)->tp_name);
    return -1;
  }
  nvtxRangePushA(PyBytes_AS_STRING(encoded));
  return 0;
}

PyObject* NvtxPush(PyObject* /*module*/, PyObject* encoded) {
  if (NvtxPushBytes(encoded) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* NvtxPop(PyObject* /*module*/, PyObject* /*unused*/) {
  nvtxRangePop();
  Py_RETURN_NONE;
}

// ---- Hooks ----

PyObject* NewGradEvents(PyTypeObject* type, PyObject* hooks);  // defined with its type

// The slots the fast paths read.
struct Slots {
  Slot entry_info, entry_path, entry_encoded, entry_parent, entry_backward, entry_source,
      entry_announced, entry_back;
  Slot info_transparent, info_ref, info_sites;
  Slot state_entries, state_end_queued, state_stale;
  TensorAttr tensor_hooks, tensor_requires_grad, tensor_grad_fn;  // of exact torch.Tensor only
};

struct Hooks {
  PyObject ob_base;  // PyObject_HEAD
  PyObject* local;   // threading.local: .state is the thread's ThreadState
  PyObject* infos;   // dict: id(module) -> ModuleInfo
  PyObject* key;     // this package's key in a tensor's hook dict
  PyObject* push;    // backend push(encoded), pop(): called unless direct_nvtx
  PyObject* pop;
  PyObject* tracing;        // torch._C._is_tracing (or _get_tracing_state)
  PyObject* grad_enabled;   // torch.is_grad_enabled
  PyObject* tensor_type;    // torch.Tensor (exact type: subclasses take the Python path)
  PyObject* containers;     // (torch.Tensor, tuple, list, dict)
  PyObject* hook_dict;      // dict: the type of a tensor's new hook dict
  PyObject* entry_type;     // thread_ranges.Entry
  PyObject* info_type;      // module_registry.ModuleInfo
  PyObject* state_type;     // thread_ranges.ThreadState
  PyObject* slow_pre;       // ModuleHooks._forward_pre
  PyObject* slow_post;      // ModuleHooks._forward_post
  PyObject* close_on;       // close_on(value, site): inputs that are not a plain tensor
  PyObject* open_on;        // open_on(value, entry): outputs that are not a plain tensor
  PyObject* events_of;      // ModuleHooks._events: a tensor's GradEvents, registering it
  PyObject* queue_end;      // ModuleHooks._queue_end_of_backward
  PyObject* push_backward;  // ThreadRanges.push_backward / pop_backward: the unusual cases
  PyObject* pop_backward;
  PyObject* fail;         // Profiler.fail(error)
  PyObject* events_type;  // GradEvents (this module's type, set at creation)
  bool direct_nvtx;       // push/pop are nvtx_push/nvtx_pop: call NVTX without Python
  char active;            // `active` (T_BOOL): ModuleHooks.install/uninstall switch it
  Slots slots;
  // The ThreadState of the Python thread that called last (`local.state` costs a lookup in the
  // thread's dict each time): valid while that thread, by its unique id, calls again.
  PyObject* cached_state;
  uint64_t cached_thread;
};

struct GradEvents {
  PyObject ob_base;           // PyObject_HEAD
  PyObject* hooks;            // the Hooks object
  PyObject* closes;           // list: forward entries whose backward closes at this gradient
  PyObject* opens;            // list: forward entries whose backward opens at this gradient
  vectorcallfunc vectorcall;  // GradEventsVectorcall: autograd calls it with no argument tuple
};

PyObject* g_nvtx_push = nullptr;  // this module's nvtx_push / nvtx_pop function objects
PyObject* g_nvtx_pop = nullptr;

// Every object field of Hooks, for construction, GC traversal and clearing.
// clang-format off
#define FLOPSCOPE_HOOKS_FIELDS(X)                                                          \
  X(local) X(infos) X(key) X(push) X(pop) X(tracing) X(grad_enabled) X(tensor_type)        \
  X(containers) X(hook_dict) X(entry_type) X(info_type) X(state_type) X(slow_pre)       \
  X(slow_post) X(close_on) X(open_on) X(events_of) X(queue_end) X(push_backward)           \
  X(pop_backward) X(fail)
// clang-format on

int Push(Hooks* self, PyObject* encoded) {
  if (self->direct_nvtx) return NvtxPushBytes(encoded);
  Ref result(PyObject_CallOneArg(self->push, encoded));
  return result ? 0 : -1;
}

int Pop(Hooks* self) {
  if (self->direct_nvtx) {
    nvtxRangePop();
    return 0;
  }
  Ref result(PyObject_CallNoArgs(self->pop));
  return result ? 0 : -1;
}

int CallTruth(PyObject* callable) {
  Ref value(PyObject_CallNoArgs(callable));
  return value ? Truth(value.get()) : -1;
}

int CallIgnoring(PyObject* callable, PyObject* first, PyObject* second = nullptr) {
  PyObject* args[] = {first, second};
  Ref result(PyObject_Vectorcall(callable, args, second != nullptr ? 2 : 1, nullptr));
  return result ? 0 : -1;
}

// The hooks' `except Exception as error: fail(error)`: returns None, or NULL when the error is
// not an Exception (KeyboardInterrupt) or fail itself raised.
PyObject* HandOverError(Hooks* self) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback != nullptr && value != nullptr) PyException_SetTraceback(value, traceback);
  Ref owned_type(type), owned_value(value), owned_traceback(traceback);
  Ref result(PyObject_CallOneArg(self->fail, value != nullptr ? value : Py_None));
  if (!result) return nullptr;
  Py_RETURN_NONE;
}

// `local.state` of the calling thread (ThreadRanges never replaces it once set), or NULL with
// AttributeError when it has none yet.
PyObject* ThreadStateOf(Hooks* self) {
  uint64_t thread = PyThreadState_GetID(PyThreadState_Get());
  if (self->cached_state != nullptr && self->cached_thread == thread) {
    return Hold(self->cached_state);
  }
  PyObject* state = PyObject_GetAttr(self->local, g_names.state);
  if (state != nullptr) {
    Py_XSETREF(self->cached_state, Hold(state));
    self->cached_thread = thread;
  }
  return state;
}

// `entries` of the calling thread's state; *slow = true when the thread has no state yet.
PyObject* ThreadEntries(Hooks* self, bool* slow) {
  Ref state(ThreadStateOf(self));
  if (!state) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
    PyErr_Clear();
    *slow = true;
    return nullptr;
  }
  PyObject* entries = Get(self->slots.state_entries, state.get());
  if (entries != nullptr && !PyList_CheckExact(entries)) {
    Py_DECREF(entries);
    PyErr_SetString(PyExc_TypeError, "flopscope_torch: ThreadState.entries is not a list");
    return nullptr;
  }
  return entries;
}

// The tensor's GradEvents or None (ModuleHooks._events): straight from its hook dict when it
// has one there, else through the Python code, which registers one. `tensor` is exactly a
// torch.Tensor.
PyObject* EventsOf(Hooks* self, PyObject* tensor) {
  Ref table(Get(self->slots.tensor_hooks, tensor));
  if (!table) return nullptr;
  if (PyDict_Check(table.get())) {
    PyObject* events = PyDict_GetItemWithError(table.get(), self->key);
    if (events != nullptr) return Hold(events);
    if (PyErr_Occurred()) return nullptr;
  }
  return PyObject_CallOneArg(self->events_of, tensor);
}

PyObject* ListOf(PyObject* events, PyObject* name, PyObject* events_type) {
  if (Py_TYPE(events) == reinterpret_cast<PyTypeObject*>(events_type)) {
    GradEvents* own = reinterpret_cast<GradEvents*>(events);
    return Hold(name == g_names.closes ? own->closes : own->opens);
  }
  return PyObject_GetAttr(events, name);
}

// `closes.append(site)` unless the same tensor came twice (site is already last).
int AddClose(Hooks* self, PyObject* events, PyObject* site) {
  Ref closes(ListOf(events, g_names.closes, self->events_type));
  if (!closes) return -1;
  if (PyList_CheckExact(closes.get())) {
    Py_ssize_t size = PyList_GET_SIZE(closes.get());
    if (size > 0 && PyList_GET_ITEM(closes.get(), size - 1) == site) return 0;
  }
  return PyList_Append(closes.get(), site);
}

int AddOpen(Hooks* self, PyObject* events, PyObject* entry) {
  Ref opens(ListOf(events, g_names.opens, self->events_type));
  return opens ? PyList_Append(opens.get(), entry) : -1;
}

// The inputs' gradient hooks close `site`'s backward range (_fast_hooks' pre, after the push).
int CloseOnInputs(Hooks* self, PyObject* inputs, PyObject* site) {
  Ref sequence(PySequence_Fast(inputs, "flopscope_torch: forward inputs are not a sequence"));
  if (!sequence) return -1;
  Py_ssize_t size = PySequence_Fast_GET_SIZE(sequence.get());
  for (Py_ssize_t index = 0; index < size; ++index) {
    PyObject* value = PySequence_Fast_GET_ITEM(sequence.get(), index);
    if (Py_TYPE(value) == reinterpret_cast<PyTypeObject*>(self->tensor_type)) {
      Ref events(EventsOf(self, value));
      if (!events) return -1;
      if (events.get() != Py_None && AddClose(self, events.get(), site) < 0) return -1;
      continue;
    }
    int container = PyObject_IsInstance(value, self->containers);
    if (container < 0) return -1;
    if (container && CallIgnoring(self->close_on, value, site) < 0) return -1;
  }
  return 0;
}

// The site the module's range opens with, or kSlow (as _fast_hooks' pre decides).
int PreFast(Hooks* self, PyObject* entries, PyObject* module, PyObject* inputs) {
  Py_ssize_t size = PyList_GET_SIZE(entries);
  if (size == 0) return kSlow;
  int tracing = CallTruth(self->tracing);
  if (tracing != 0) return tracing < 0 ? -1 : kSlow;
  Ref parent(Hold(PyList_GET_ITEM(entries, size - 1)));
  Ref id(PyLong_FromVoidPtr(module));
  if (!id) return -1;
  Ref info(Hold(PyDict_GetItemWithError(self->infos, id.get())));
  if (!info) return PyErr_Occurred() ? -1 : kSlow;
  const Slots& slots = self->slots;
  int transparent = TruthOf(slots.info_transparent, info.get());
  if (transparent != 0) return transparent < 0 ? -1 : kSlow;
  Ref ref(Get(slots.info_ref, info.get()));
  if (!ref) return -1;
  Ref target(Referent(ref.get()));
  if (!target) return -1;
  if (target.get() != module) return kSlow;
  Ref sites(Get(slots.info_sites, info.get()));
  if (!sites) return -1;
  if (!PyDict_Check(sites.get())) return kSlow;
  Ref site(Hold(PyDict_GetItemWithError(sites.get(), parent.get())));
  if (!site) return PyErr_Occurred() ? -1 : kSlow;
  Ref encoded(Get(slots.entry_encoded, site.get()));
  if (!encoded || Push(self, encoded.get()) < 0) return -1;
  if (PyList_Append(entries, site.get()) < 0) return -1;
  int training = CallTruth(self->grad_enabled);
  if (training <= 0) return training;
  return CloseOnInputs(self, inputs, site.get());
}

PyObject* HooksPre(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  Hooks* self = reinterpret_cast<Hooks*>(object);
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "pre(module, inputs)");
    return nullptr;
  }
  if (!self->active) Py_RETURN_NONE;
  bool slow = false;
  Ref entries(ThreadEntries(self, &slow));
  if (slow) return PyObject_Vectorcall(self->slow_pre, args, 2, nullptr);
  int result = entries ? PreFast(self, entries.get(), args[0], args[1]) : -1;
  if (result == kSlow) return PyObject_Vectorcall(self->slow_pre, args, 2, nullptr);
  if (result < 0) return HandOverError(self);
  Py_RETURN_NONE;
}

// A new GradEvents in the output's new hook dict, opening `entry`'s backward range; kSlow
// where this torch has no _register_hook_dict (then the Python code registers it).
int RegisterEvents(Hooks* self, PyObject* output, PyObject* grad_fn, PyObject* entry) {
  const TensorAttr& hooks = self->slots.tensor_hooks;
  Ref table(self->hook_dict == reinterpret_cast<PyObject*>(&PyDict_Type)
                ? PyDict_New()
                : PyObject_CallNoArgs(self->hook_dict));
  if (!table) return -1;
  if (Set(hooks, output, table.get()) < 0) return -1;
  Ref registered(PyObject_CallMethodOneArg(grad_fn, g_names.register_hook_dict, output));
  if (!registered) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();  // not in this torch: the Python code registers through Tensor.register_hook
    return Set(hooks, output, Py_None) < 0 ? -1 : kSlow;
  }
  Ref events(NewGradEvents(reinterpret_cast<PyTypeObject*>(self->events_type),
                           reinterpret_cast<PyObject*>(self)));
  if (!events) return -1;
  if (PyObject_SetItem(table.get(), self->key, events.get()) < 0) return -1;
  return AddOpen(self, events.get(), entry);
}

// The output's gradient hook opens `entry`'s backward range (_fast_hooks' post, after the pop).
int OpenOnOutput(Hooks* self, PyObject* output, PyObject* entry) {
  if (Py_TYPE(output) != reinterpret_cast<PyTypeObject*>(self->tensor_type)) {
    return CallIgnoring(self->open_on, output, entry);
  }
  const Slots& slots = self->slots;
  Ref table(Get(slots.tensor_hooks, output));
  if (!table) return -1;
  if (table.get() == Py_None) {
    Ref requires_grad(Get(slots.tensor_requires_grad, output));
    int truth = requires_grad ? Truth(requires_grad.get()) : -1;
    if (truth <= 0) return truth;
    Ref grad_fn(Get(slots.tensor_grad_fn, output));
    if (!grad_fn) return -1;
    if (grad_fn.get() == Py_None) return 0;
    int result = RegisterEvents(self, output, grad_fn.get(), entry);
    if (result != kSlow) return result;
  }
  Ref events(EventsOf(self, output));
  if (!events) return -1;
  return events.get() == Py_None ? 0 : AddOpen(self, events.get(), entry);
}

// Whether `entry` (the innermost range) is `module`'s usual forward range: kDone or kSlow.
int IsUsualForward(const Slots& slots, PyObject* entry, PyObject* module) {
  int backward = TruthOf(slots.entry_backward, entry);
  if (backward != 0) return backward < 0 ? -1 : kSlow;
  Ref parent(Get(slots.entry_parent, entry));
  if (!parent) return -1;
  if (parent.get() == Py_None) return kSlow;
  int announced = TruthOf(slots.entry_announced, entry);
  if (announced <= 0) return announced < 0 ? -1 : kSlow;
  Ref info(Get(slots.entry_info, entry));
  if (!info) return -1;
  Ref ref(Get(slots.info_ref, info.get()));
  if (!ref) return -1;
  Ref target(Referent(ref.get()));
  if (!target) return -1;
  return target.get() == module ? kDone : kSlow;
}

int PostFast(Hooks* self, PyObject* entries, PyObject* module, PyObject* output) {
  Py_ssize_t size = PyList_GET_SIZE(entries);
  if (size == 0) return kSlow;
  Ref entry(Hold(PyList_GET_ITEM(entries, size - 1)));
  int usual = IsUsualForward(self->slots, entry.get(), module);
  if (usual != kDone) return usual;
  if (Pop(self) < 0) return -1;
  PopLast(entries);
  int training = CallTruth(self->grad_enabled);
  if (training <= 0) return training;
  return OpenOnOutput(self, output, entry.get());
}

PyObject* HooksPost(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  Hooks* self = reinterpret_cast<Hooks*>(object);
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "post(module, inputs, output)");
    return nullptr;
  }
  if (!self->active) Py_RETURN_NONE;
  bool slow = false;
  Ref entries(ThreadEntries(self, &slow));
  if (slow) return PyObject_Vectorcall(self->slow_post, args, 3, nullptr);
  int result = entries ? PostFast(self, entries.get(), args[0], args[2]) : -1;
  if (result == kSlow) return PyObject_Vectorcall(self->slow_post, args, 3, nullptr);
  if (result < 0) return HandOverError(self);
  Py_RETURN_NONE;
}

// ---- backward: GradEvents ----

// `forward`'s backward Entry under `top`: the one cached on `forward` (Entry.back) when it was
// made under this very `top`, else a new one, cached.
PyObject* BackwardEntry(Hooks* self, PyObject* forward, PyObject* top) {
  const Slots& slots = self->slots;
  Ref cached(Get(slots.entry_back, forward));
  if (!cached) return nullptr;
  if (cached.get() != Py_None) {
    Ref parent(Get(slots.entry_parent, cached.get()));
    if (!parent) return nullptr;
    if (parent.get() == top) return Hold(cached.get());
  }
  Ref info(Get(slots.entry_info, forward));
  Ref path(Get(slots.entry_path, forward));
  Ref encoded(Get(slots.entry_encoded, forward));
  if (!info || !path || !encoded) return nullptr;
  PyObject* args[] = {info.get(), path.get(), encoded.get(), top, Py_True, forward};
  Ref entry(PyObject_Vectorcall(self->entry_type, args, 6, nullptr));
  if (!entry || PyObject_SetAttr(forward, g_names.back, entry.get()) < 0) return nullptr;
  return Hold(entry.get());
}

// 1 when the innermost entry's `slot` (source) is `expected`, 0 when not, -1 on error.
int TopIs(PyObject* entries, const Slot& slot, PyObject* expected) {
  Py_ssize_t size = PyList_GET_SIZE(entries);
  if (size == 0) return 0;
  Ref value(Get(slot, PyList_GET_ITEM(entries, size - 1)));
  return value ? value.get() == expected : -1;
}

int CloseBackward(Hooks* self, PyObject* entries, PyObject* closes) {
  for (Py_ssize_t index = PyList_GET_SIZE(closes) - 1; index >= 0; --index) {
    if (index >= PyList_GET_SIZE(closes)) continue;
    Ref entry(Hold(PyList_GET_ITEM(closes, index)));
    int usual = TopIs(entries, self->slots.entry_source, entry.get());
    if (usual < 0) return -1;
    if (usual) {
      if (Pop(self) < 0) return -1;
      PopLast(entries);
    } else if (CallIgnoring(self->pop_backward, entry.get()) < 0) {
      return -1;
    }
  }
  return 0;
}

// 1 when `entry`'s backward opens inline under `top` (ModuleHooks.on_gradient's usual case).
int OpensInline(const Slots& slots, PyObject* state, PyObject* top, PyObject* entry) {
  int backward = TruthOf(slots.entry_backward, top);
  if (backward <= 0) return backward;
  Ref parent(Get(slots.entry_parent, entry));
  if (!parent) return -1;
  if (parent.get() == Py_None) return 0;
  Ref source(Get(slots.entry_source, top));
  if (!source) return -1;
  if (source.get() != parent.get()) return 0;
  int stale = TruthOf(slots.state_stale, state);
  return stale < 0 ? -1 : !stale;
}

int OpenBackward(Hooks* self, PyObject* state, PyObject* entries, PyObject* opens) {
  for (Py_ssize_t index = PyList_GET_SIZE(opens) - 1; index >= 0; --index) {
    if (index >= PyList_GET_SIZE(opens)) continue;
    Ref entry(Hold(PyList_GET_ITEM(opens, index)));
    Py_ssize_t size = PyList_GET_SIZE(entries);
    Ref top(size > 0 ? Hold(PyList_GET_ITEM(entries, size - 1)) : nullptr);
    int inline_open = top ? OpensInline(self->slots, state, top.get(), entry.get()) : 0;
    if (inline_open < 0) return -1;
    if (!inline_open) {
      if (CallIgnoring(self->push_backward, entry.get()) < 0) return -1;
      continue;
    }
    Ref back(BackwardEntry(self, entry.get(), top.get()));
    Ref encoded(Get(self->slots.entry_encoded, entry.get()));
    if (!back || !encoded || Push(self, encoded.get()) < 0) return -1;
    if (PyList_Append(entries, back.get()) < 0) return -1;
  }
  return 0;
}

// ModuleHooks.on_gradient: backward ranges close (inputs' gradients complete), then open.
int OnGradient(Hooks* self, GradEvents* events) {
  Ref state(ThreadStateOf(self));
  int queued = 0;
  if (state) {
    queued = TruthOf(self->slots.state_end_queued, state.get());
    if (queued < 0) return -1;
  } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
    PyErr_Clear();
  } else {
    return -1;
  }
  if (!queued) {
    Ref result(PyObject_CallNoArgs(self->queue_end));
    if (!result) return -1;
    state.reset(ThreadStateOf(self));
    if (!state) return -1;
  }
  Ref entries(Get(self->slots.state_entries, state.get()));
  if (!entries) return -1;
  if (!PyList_CheckExact(entries.get()) || !PyList_CheckExact(events->closes) ||
      !PyList_CheckExact(events->opens)) {
    PyErr_SetString(PyExc_TypeError, "flopscope_torch: backward bookkeeping is not a list");
    return -1;
  }
  if (CloseBackward(self, entries.get(), events->closes) < 0) return -1;
  return OpenBackward(self, state.get(), entries.get(), events->opens);
}

PyObject* GradEventsCall(PyObject* object, PyObject* /*args*/, PyObject* /*kwargs*/) {
  GradEvents* events = reinterpret_cast<GradEvents*>(object);
  Hooks* hooks = reinterpret_cast<Hooks*>(events->hooks);  // checked by GradEventsNew
  if (hooks->active && OnGradient(hooks, events) < 0) return HandOverError(hooks);
  Py_RETURN_NONE;  // the gradient is left as it is
}

PyObject* GradEventsVectorcall(PyObject* object, PyObject* const* /*args*/, size_t /*nargsf*/,
                               PyObject* /*kwnames*/) {
  return GradEventsCall(object, nullptr, nullptr);
}

PyObject* g_hooks_type = nullptr;  // Hooks

PyObject* GradEventsNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* hooks = nullptr;
  static const char* keywords[] = {"hooks", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:GradEvents", const_cast<char**>(keywords),
                                   reinterpret_cast<PyTypeObject*>(g_hooks_type), &hooks)) {
    return nullptr;
  }
  return NewGradEvents(type, hooks);
}

PyObject* NewGradEvents(PyTypeObject* type, PyObject* hooks) {
  Ref object(type->tp_alloc(type, 0));
  if (!object) return nullptr;
  GradEvents* events = reinterpret_cast<GradEvents*>(object.get());
  events->hooks = Hold(hooks);
  events->closes = PyList_New(0);
  events->opens = PyList_New(0);
  events->vectorcall = &GradEventsVectorcall;
  if (events->closes == nullptr || events->opens == nullptr) return nullptr;
  return Hold(object.get());
}

int GradEventsTraverse(PyObject* object, visitproc visit, void* arg) {
  GradEvents* events = reinterpret_cast<GradEvents*>(object);
  Py_VISIT(Py_TYPE(object));
  Py_VISIT(events->hooks);
  Py_VISIT(events->closes);
  Py_VISIT(events->opens);
  return 0;
}

int GradEventsClear(PyObject* object) {
  GradEvents* events = reinterpret_cast<GradEvents*>(object);
  Py_CLEAR(events->hooks);
  Py_CLEAR(events->closes);
  Py_CLEAR(events->opens);
  return 0;
}

void GradEventsDealloc(PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  PyObject_GC_UnTrack(object);
  GradEventsClear(object);
  type->tp_free(object);
  Py_DECREF(type);
}

PyMemberDef g_grad_events_members[] = {
    {"hooks", T_OBJECT_EX, offsetof(GradEvents, hooks), READONLY, nullptr},
    {"closes", T_OBJECT_EX, offsetof(GradEvents, closes), READONLY, nullptr},
    {"opens", T_OBJECT_EX, offsetof(GradEvents, opens), READONLY, nullptr},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(GradEvents, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot g_grad_events_slots[] = {
    {Py_tp_doc,
     const_cast<char*>("The package's one gradient hook on a tensor (module_hooks.py).")},
    {Py_tp_new, reinterpret_cast<void*>(&GradEventsNew)},
    {Py_tp_call, reinterpret_cast<void*>(&GradEventsCall)},
    {Py_tp_traverse, reinterpret_cast<void*>(&GradEventsTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&GradEventsClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(&GradEventsDealloc)},
    {Py_tp_members, g_grad_events_members},
    {0, nullptr}};

PyType_Spec g_grad_events_spec = {
    "flopscope_torch._native.GradEvents", sizeof(GradEvents), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, g_grad_events_slots};

PyObject* g_events_type = nullptr;

// ---- Hooks: construction and lifetime ----

int TakeField(PyObject* config, const char* name, PyObject** field) {
  PyObject* value = PyDict_GetItemString(config, name);
  if (value == nullptr) {
    PyErr_Format(PyExc_KeyError, "flopscope_torch._native.Hooks: config lacks '%s'", name);
    return -1;
  }
  *field = Hold(value);
  return 0;
}

void ResolveSlots(Hooks* self) {
  Slots& slots = self->slots;
  Resolve(self->entry_type, g_names.info, &slots.entry_info);
  Resolve(self->entry_type, g_names.path, &slots.entry_path);
  Resolve(self->entry_type, g_names.encoded, &slots.entry_encoded);
  Resolve(self->entry_type, g_names.parent, &slots.entry_parent);
  Resolve(self->entry_type, g_names.backward, &slots.entry_backward);
  Resolve(self->entry_type, g_names.source, &slots.entry_source);
  Resolve(self->entry_type, g_names.announced, &slots.entry_announced);
  Resolve(self->entry_type, g_names.back, &slots.entry_back);
  Resolve(self->info_type, g_names.transparent, &slots.info_transparent);
  Resolve(self->info_type, g_names.ref, &slots.info_ref);
  Resolve(self->info_type, g_names.sites, &slots.info_sites);
  Resolve(self->state_type, g_names.entries, &slots.state_entries);
  Resolve(self->state_type, g_names.end_queued, &slots.state_end_queued);
  Resolve(self->state_type, g_names.stale, &slots.state_stale);
  Resolve(self->tensor_type, g_names.backward_hooks, &slots.tensor_hooks);
  Resolve(self->tensor_type, g_names.requires_grad, &slots.tensor_requires_grad);
  Resolve(self->tensor_type, g_names.grad_fn, &slots.tensor_grad_fn);
}

// Hooks(config): config is a dict with every field of struct Hooks but events_type and
// direct_nvtx (see FLOPSCOPE_HOOKS_FIELDS).
PyObject* HooksNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* config = nullptr;
  if (!PyArg_ParseTuple(args, "O!:Hooks", &PyDict_Type, &config)) return nullptr;
  Ref object(type->tp_alloc(type, 0));
  if (!object) return nullptr;
  Hooks* self = reinterpret_cast<Hooks*>(object.get());
#define FLOPSCOPE_TAKE(name) \
  if (TakeField(config, #name, &self->name) < 0) return nullptr;
  FLOPSCOPE_HOOKS_FIELDS(FLOPSCOPE_TAKE)
#undef FLOPSCOPE_TAKE
  self->events_type = Hold(g_events_type);
  self->direct_nvtx = self->push == g_nvtx_push && self->pop == g_nvtx_pop;
  self->active = 0;
  self->cached_state = nullptr;
  ResolveSlots(self);
  return Hold(object.get());
}

int HooksTraverse(PyObject* object, visitproc visit, void* arg) {
  Hooks* self = reinterpret_cast<Hooks*>(object);
  Py_VISIT(Py_TYPE(object));
#define FLOPSCOPE_VISIT(name) Py_VISIT(self->name);
  FLOPSCOPE_HOOKS_FIELDS(FLOPSCOPE_VISIT)
#undef FLOPSCOPE_VISIT
  Py_VISIT(self->events_type);
  Py_VISIT(self->cached_state);
  return 0;
}

int HooksClear(PyObject* object) {
  Hooks* self = reinterpret_cast<Hooks*>(object);
#define FLOPSCOPE_CLEAR(name) Py_CLEAR(self->name);
  FLOPSCOPE_HOOKS_FIELDS(FLOPSCOPE_CLEAR)
#undef FLOPSCOPE_CLEAR
  Py_CLEAR(self->events_type);
  Py_CLEAR(self->cached_state);
  return 0;
}

void HooksDealloc(PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  PyObject_GC_UnTrack(object);
  HooksClear(object);
  type->tp_free(object);
  Py_DECREF(type);
}

PyObject* HooksDirectNvtx(PyObject* object, void* /*closure*/) {
  return PyBool_FromLong(reinterpret_cast<Hooks*>(object)->direct_nvtx);
}

template <typename Function>
PyCFunction AsCFunction(Function function) {
  // The usual CPython cast of a METH_FASTCALL / METH_O function, via a generic pointer.
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(function));
}

PyMemberDef g_hooks_members[] = {
    {"active", T_BOOL, offsetof(Hooks, active), 0, "the hooks do their work (else return)"},
    {nullptr, 0, 0, 0, nullptr}};

PyMethodDef g_hooks_methods[] = {
    {"pre", AsCFunction(&HooksPre), METH_FASTCALL, "The global forward pre-hook."},
    {"post", AsCFunction(&HooksPost), METH_FASTCALL, "The global forward hook."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef g_hooks_getset[] = {
    {"direct_nvtx", &HooksDirectNvtx, nullptr, "push/pop call NVTX without Python", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_hooks_slots[] = {
    {Py_tp_doc, const_cast<char*>("The global forward hooks' fast paths (module_hooks.py).")},
    {Py_tp_new, reinterpret_cast<void*>(&HooksNew)},
    {Py_tp_traverse, reinterpret_cast<void*>(&HooksTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&HooksClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(&HooksDealloc)},
    {Py_tp_methods, g_hooks_methods},
    {Py_tp_getset, g_hooks_getset},
    {Py_tp_members, g_hooks_members},
    {0, nullptr}};

PyType_Spec g_hooks_spec = {"flopscope_torch._native.Hooks", sizeof(Hooks), 0,
                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, g_hooks_slots};

// ---- the module ----

PyMethodDef g_module_methods[] = {
    {"nvtx_push", AsCFunction(&NvtxPush), METH_O, "nvtxRangePushA(bytes)."},
    {"nvtx_pop", AsCFunction(&NvtxPop), METH_NOARGS, "nvtxRangePop()."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef g_module = {PyModuleDef_HEAD_INIT,
                        "flopscope_torch._native",
                        "The hot paths of flopscope_torch's module hooks (fast_hooks.cc).",
                        -1,
                        g_module_methods,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr};

bool InternNames() {
#define FLOPSCOPE_INTERN(field, text) \
  if ((g_names.field = PyUnicode_InternFromString(text)) == nullptr) return false;
  FLOPSCOPE_INTERN(state, "state")
  FLOPSCOPE_INTERN(entries, "entries")
  FLOPSCOPE_INTERN(transparent, "transparent")
  FLOPSCOPE_INTERN(ref, "ref")
  FLOPSCOPE_INTERN(sites, "_sites")
  FLOPSCOPE_INTERN(encoded, "encoded")
  FLOPSCOPE_INTERN(backward, "backward")
  FLOPSCOPE_INTERN(parent, "parent")
  FLOPSCOPE_INTERN(announced, "announced")
  FLOPSCOPE_INTERN(info, "info")
  FLOPSCOPE_INTERN(path, "path")
  FLOPSCOPE_INTERN(source, "source")
  FLOPSCOPE_INTERN(back, "back")
  FLOPSCOPE_INTERN(backward_hooks, "_backward_hooks")
  FLOPSCOPE_INTERN(requires_grad, "requires_grad")
  FLOPSCOPE_INTERN(grad_fn, "grad_fn")
  FLOPSCOPE_INTERN(register_hook_dict, "_register_hook_dict")
  FLOPSCOPE_INTERN(closes, "closes")
  FLOPSCOPE_INTERN(opens, "opens")
  FLOPSCOPE_INTERN(end_queued, "end_queued")
  FLOPSCOPE_INTERN(stale, "stale")
#undef FLOPSCOPE_INTERN
  return true;
}

int AddType(PyObject* module, PyType_Spec* spec, const char* name, PyObject** keep) {
  PyObject* type = PyType_FromSpec(spec);
  if (type == nullptr) return -1;
  *keep = Hold(type);
  return PyModule_AddObject(module, name, type);  // steals `type` on success
}

}  // namespace

PyMODINIT_FUNC PyInit__native() {
  if (!InternNames()) return nullptr;
  Ref module(PyModule_Create(&g_module));
  if (!module) return nullptr;
  if (AddType(module.get(), &g_grad_events_spec, "GradEvents", &g_events_type) < 0 ||
      AddType(module.get(), &g_hooks_spec, "Hooks", &g_hooks_type) < 0) {
    return nullptr;
  }
  g_nvtx_push = PyObject_GetAttrString(module.get(), "nvtx_push");
  g_nvtx_pop = PyObject_GetAttrString(module.get(), "nvtx_pop");
  if (g_nvtx_push == nullptr || g_nvtx_pop == nullptr) return nullptr;
  if (PyModule_AddIntConstant(module.get(), "ABI_VERSION", kNativeAbiVersion) < 0) {
    return nullptr;
  }
  return Hold(module.get());
}
