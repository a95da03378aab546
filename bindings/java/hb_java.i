/* hb_java.i - Java typemaps for the roles of ../hb.i (package org.hb).
 * The generated classes (HbNative, HbNativeJNI, the config proxies) are
 * package-private: the public API is the hand-written org.hb classes.
 * Buffers are primitive arrays (pinned copies, written back for outputs) or
 * direct ByteBuffers (zero-copy). A failed call throws the checked
 * org.hb.HbException with the status and the message of that same call. */
%module HbNative

%pragma(java) jniclassclassmodifiers = "final class"
%pragma(java) moduleclassmodifiers = "final class"
%pragma(java) jniclasscode = %{
  static {
    System.loadLibrary("hb_jni");
  }

  /* Serving lookups, hand-written below (hbj_serving_lookup_*): one native
   * call, no copy of ids or rows; they return the version read. */
  static final native long servingLookupArrays(long emb, long[] ids, int n, float[] out)
      throws HbException;
  static final native long servingLookupDirect(long emb, java.nio.ByteBuffer ids, long n,
                                               java.nio.ByteBuffer out) throws HbException;
%}
%javaconst(1);
%include "enumsimple.swg"
%typemap(javaclassmodifiers) SWIGTYPE "final class"
%typemap(javafinalize) SWIGTYPE ""

%{
#include <jni.h>
#include <pthread.h>
#include "hb.h"

/* Throws org.hb.HbException(status, name, hb_last_error()); called right
 * after the failing call on the same thread. */
static void hbj_throw(JNIEnv *env, hb_status status) {
  const char *message = hb_last_error();
  jclass cls = (*env)->FindClass(env, "org/hb/HbException");
  jmethodID ctor;
  jstring jname, jmessage;
  jobject exc;
  if (!cls) return;  /* NoClassDefFoundError pending */
  ctor = (*env)->GetMethodID(env, cls, "<init>",
                             "(ILjava/lang/String;Ljava/lang/String;)V");
  jname = (*env)->NewStringUTF(env, hb_status_name(status));
  jmessage = (*env)->NewStringUTF(env, message);
  if (ctor && jname && jmessage) {
    exc = (*env)->NewObject(env, cls, ctor, (jint)status, jname, jmessage);
    if (exc) (*env)->Throw(env, (jthrowable)exc);
  }
}

static void hbj_illegal(JNIEnv *env, const char *param, const char *what) {
  char text[256];
  jclass cls = (*env)->FindClass(env, "java/lang/IllegalArgumentException");
  snprintf(text, sizeof text, "%s: %s", param, what);
  if (cls) (*env)->ThrowNew(env, cls, text);
}

/* A buffer argument: a primitive array (Get<T>ArrayElements, released with
 * copy-back for outputs) or a direct java.nio.Buffer (its address). */
typedef struct {
  jobject array;  /* non-NULL when ptr came from a primitive array */
  char kind;      /* JNI signature letter of the array's elements */
  void *ptr;
  jlong elements; /* array length, or buffer capacity */
} hbj_buf;

static const char hbj_kinds[] = "FDIJBS";

/* Classes looked up once, when the JVM loads the library (FindClass on
 * every call would cost more than the call). */
static jclass hbj_array_classes[sizeof hbj_kinds - 1];
static jclass hbj_buffer_class;

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
  JNIEnv *env;
  size_t i;
  (void)reserved;
  if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  for (i = 0; i < sizeof hbj_kinds - 1; ++i) {
    char sig[3] = {'[', hbj_kinds[i], 0};
    jclass cls = (*env)->FindClass(env, sig);
    if (!cls) return JNI_ERR;
    hbj_array_classes[i] = (jclass)(*env)->NewGlobalRef(env, cls);
    (*env)->DeleteLocalRef(env, cls);
  }
  {
    jclass cls = (*env)->FindClass(env, "java/nio/Buffer");
    if (!cls) return JNI_ERR;
    hbj_buffer_class = (jclass)(*env)->NewGlobalRef(env, cls);
    (*env)->DeleteLocalRef(env, cls);
  }
  return JNI_VERSION_1_6;
}

/* kind: the element letter required ('F', 'J', 'I') or 0 for any. */
static int hbj_acquire(JNIEnv *env, jobject obj, char kind, hbj_buf *b,
                       const char *param) {
  size_t i;
  memset(b, 0, sizeof *b);
  if (!obj) return 1;
  for (i = 0; i < sizeof hbj_kinds - 1; ++i) {
    char k = hbj_kinds[i];
    if (!(*env)->IsInstanceOf(env, obj, hbj_array_classes[i])) continue;
    if (kind && kind != k) break;
    b->array = obj;
    b->kind = k;
    b->elements = (*env)->GetArrayLength(env, (jarray)obj);
    switch (k) {
      case 'F': b->ptr = (*env)->GetFloatArrayElements(env, (jfloatArray)obj, NULL); break;
      case 'D': b->ptr = (*env)->GetDoubleArrayElements(env, (jdoubleArray)obj, NULL); break;
      case 'I': b->ptr = (*env)->GetIntArrayElements(env, (jintArray)obj, NULL); break;
      case 'J': b->ptr = (*env)->GetLongArrayElements(env, (jlongArray)obj, NULL); break;
      case 'B': b->ptr = (*env)->GetByteArrayElements(env, (jbyteArray)obj, NULL); break;
      case 'S': b->ptr = (*env)->GetShortArrayElements(env, (jshortArray)obj, NULL); break;
    }
    if (!b->ptr) {
      b->array = NULL;
      return 0;  /* OutOfMemoryError pending */
    }
    return 1;
  }
  if ((*env)->IsInstanceOf(env, obj, hbj_buffer_class)) {
    b->ptr = (*env)->GetDirectBufferAddress(env, obj);
    b->elements = (*env)->GetDirectBufferCapacity(env, obj);
    if (b->ptr) return 1;
    hbj_illegal(env, param, "the buffer is not direct (use ByteBuffer.allocateDirect)");
    return 0;
  }
  hbj_illegal(env, param, kind == 'F' ? "expected a float[] or a direct ByteBuffer"
                          : kind == 'J' ? "expected a long[] or a direct ByteBuffer"
                          : kind == 'I' ? "expected an int[] or a direct ByteBuffer"
                          : "expected a primitive array or a direct ByteBuffer");
  return 0;
}

static void hbj_release(JNIEnv *env, hbj_buf *b, int commit) {
  jint mode = commit ? 0 : JNI_ABORT;
  if (!b->array) return;
  switch (b->kind) {
    case 'F': (*env)->ReleaseFloatArrayElements(env, (jfloatArray)b->array, (jfloat *)b->ptr, mode); break;
    case 'D': (*env)->ReleaseDoubleArrayElements(env, (jdoubleArray)b->array, (jdouble *)b->ptr, mode); break;
    case 'I': (*env)->ReleaseIntArrayElements(env, (jintArray)b->array, (jint *)b->ptr, mode); break;
    case 'J': (*env)->ReleaseLongArrayElements(env, (jlongArray)b->array, (jlong *)b->ptr, mode); break;
    case 'B': (*env)->ReleaseByteArrayElements(env, (jbyteArray)b->array, (jbyte *)b->ptr, mode); break;
    case 'S': (*env)->ReleaseShortArrayElements(env, (jshortArray)b->array, (jshort *)b->ptr, mode); break;
  }
  b->array = NULL;
}

/* Serving lookups (org.hb.Embedding checks lengths and the handle kind
 * first). Arrays are pinned with GetPrimitiveArrayCritical: no copy in or
 * out, and nothing but the lookup runs while they are held -- a serving
 * lookup never blocks, so the GC waits for one lookup at most. The error
 * is thrown after both are released (hb_last_error is still this call's:
 * the releases call nothing in hb). */
JNIEXPORT jlong JNICALL Java_org_hb_HbNativeJNI_servingLookupArrays(
    JNIEnv *env, jclass cls, jlong emb, jlongArray ids, jint n, jfloatArray out) {
  int64_t version = 0;
  hb_status s;
  void *pi, *po;
  (void)cls;
  if (n == 0) { /* nothing to pin (a JVM may hand out NULL for no elements) */
    s = hb_embedding_lookup_version((hb_embedding *)(intptr_t)emb, NULL, 0, NULL, &version);
    if (s != HB_OK) hbj_throw(env, s);
    return (jlong)version;
  }
  pi = (*env)->GetPrimitiveArrayCritical(env, ids, NULL);
  if (!pi) return 0; /* OutOfMemoryError pending */
  po = (*env)->GetPrimitiveArrayCritical(env, out, NULL);
  if (!po) {
    (*env)->ReleasePrimitiveArrayCritical(env, ids, pi, JNI_ABORT);
    return 0;
  }
  s = hb_embedding_lookup_version((hb_embedding *)(intptr_t)emb, (const int64_t *)pi,
                                  (size_t)n, po, &version);
  (*env)->ReleasePrimitiveArrayCritical(env, out, po, 0);
  (*env)->ReleasePrimitiveArrayCritical(env, ids, pi, JNI_ABORT);
  if (s != HB_OK) hbj_throw(env, s);
  return (jlong)version;
}

JNIEXPORT jlong JNICALL Java_org_hb_HbNativeJNI_servingLookupDirect(
    JNIEnv *env, jclass cls, jlong emb, jobject ids, jlong n, jobject out) {
  int64_t version = 0;
  hb_status s;
  (void)cls;
  s = hb_embedding_lookup_version((hb_embedding *)(intptr_t)emb,
                                  (const int64_t *)(*env)->GetDirectBufferAddress(env, ids),
                                  (size_t)n, (*env)->GetDirectBufferAddress(env, out),
                                  &version);
  if (s != HB_OK) hbj_throw(env, s);
  return (jlong)version;
}

/* Listeners: a global reference per registration, kept per context and
 * dropped by hbj_release_listeners when the Java Context closes. */
typedef struct hbj_listener {
  JavaVM *vm;
  jobject target;
  hb_context *ctx;
  struct hbj_listener *next;
} hbj_listener;
static hbj_listener *hbj_listeners = NULL;
static pthread_mutex_t hbj_listeners_mu = PTHREAD_MUTEX_INITIALIZER;

static void hbj_listener_call(hb_context *ctx, int32_t event, const char *path,
                              void *user_data) {
  hbj_listener *l = (hbj_listener *)user_data;
  JNIEnv *env = NULL;
  int attached = 0;
  jclass cls;
  jmethodID method;
  jstring jpath;
  (void)ctx;
  if ((*l->vm)->GetEnv(l->vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) {
    if ((*l->vm)->AttachCurrentThread(l->vm, (void **)&env, NULL) != JNI_OK) return;
    attached = 1;
  }
  cls = (*env)->GetObjectClass(env, l->target);
  method = (*env)->GetMethodID(env, cls, "onEvent", "(ILjava/lang/String;)V");
  jpath = (*env)->NewStringUTF(env, path ? path : "");
  if (method && jpath) (*env)->CallVoidMethod(env, l->target, method, (jint)event, jpath);
  if ((*env)->ExceptionCheck(env)) {  /* cannot cross the C library */
    (*env)->ExceptionDescribe(env);
    (*env)->ExceptionClear(env);
  }
  (*env)->DeleteLocalRef(env, jpath);
  (*env)->DeleteLocalRef(env, cls);
  if (attached) (*l->vm)->DetachCurrentThread(l->vm);
}

static hbj_listener *hbj_listener_new(JNIEnv *env, hb_context *ctx, jobject target) {
  hbj_listener *l = (hbj_listener *)calloc(1, sizeof *l);
  if (!l) return NULL;
  (*env)->GetJavaVM(env, &l->vm);
  l->target = (*env)->NewGlobalRef(env, target);
  l->ctx = ctx;
  pthread_mutex_lock(&hbj_listeners_mu);
  l->next = hbj_listeners;
  hbj_listeners = l;
  pthread_mutex_unlock(&hbj_listeners_mu);
  return l;
}
%}


/* ---- 64-bit integers: Java long (SWIG maps C long to int) ----------------- */
%include <stdint.i>
%include <typemaps.i>
%apply long long { int64_t, uint64_t };
%apply long long *OUTPUT { int64_t *OUTPUT };

/* ---- hb_status: void, or HbException ------------------------------------- */
%typemap(jni) hb_status "jint"
%typemap(jtype) hb_status "int"
%typemap(jstype) hb_status "void"
%typemap(out) hb_status {
  if ($1 != HB_OK) {
    hbj_throw(jenv, $1);
    return $null;
  }
  $result = 0;
}
%typemap(javaout, throws="HbException") hb_status { $jnicall; }

/* ---- Handles: long (0 is NULL) -------------------------------------------- */
%typemap(jni) void *HB_HANDLE "jlong"
%typemap(jtype) void *HB_HANDLE "long"
%typemap(jstype) void *HB_HANDLE "long"
%typemap(in) void *HB_HANDLE %{ $1 = ($1_ltype)(intptr_t)$input; %}
%typemap(javain) void *HB_HANDLE "$javainput"

%typemap(jni) void **HB_HANDLE_OUT "jlongArray"
%typemap(jtype) void **HB_HANDLE_OUT "long[]"
%typemap(jstype) void **HB_HANDLE_OUT "long[]"
%typemap(javain) void **HB_HANDLE_OUT "$javainput"
%typemap(in) void **HB_HANDLE_OUT ($*1_ltype handle = NULL) {
  if (!$input || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    hbj_illegal(jenv, "$1_name", "expected a long[1] holder");
    return $null;
  }
  $1 = &handle;
}
%typemap(argout) void **HB_HANDLE_OUT {
  jlong value = (jlong)(intptr_t)handle$argnum;
  (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &value);
}

/* ---- Buffers: Object (primitive array or direct Buffer; null is NULL) ----
 * A typemap that throws returns at once, before the freearg of the buffers
 * already taken: the public classes check every buffer first, so only an
 * OutOfMemoryError can take that path. */
%define HBJ_BUFFER(TYPE, KIND, COMMIT)
%typemap(jni) TYPE "jobject"
%typemap(jtype) TYPE "Object"
%typemap(jstype) TYPE "Object"
%typemap(javain) TYPE "$javainput"
%typemap(in) TYPE (hbj_buf buf) {
  if (!hbj_acquire(jenv, $input, KIND, &buf, "$1_name")) return $null;
  $1 = ($1_ltype)buf.ptr;
}
%typemap(freearg) TYPE { hbj_release(jenv, &buf$argnum, COMMIT); }
%enddef
HBJ_BUFFER(const void *HB_BUFFER_IN, 0, 0)
HBJ_BUFFER(void *HB_BUFFER_OUT, 0, 1)
HBJ_BUFFER(const float *HB_ARRAY_IN, 'F', 0)
HBJ_BUFFER(const int64_t *HB_ARRAY_IN, 'J', 0)
HBJ_BUFFER(int32_t *HB_ARRAY_OUT, 'I', 1)
HBJ_BUFFER(float *HB_ARRAY_OUT, 'F', 1)

/* A blob of any bytes: a new byte[] in a byte[][1] holder. */
%typemap(jni) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "jobjectArray"
%typemap(jtype) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "byte[][]"
%typemap(jstype) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "byte[][]"
%typemap(javain) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "$javainput"
%typemap(in) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) (void *bytes = NULL, size_t len = 0) {
  if (!$input || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    hbj_illegal(jenv, "$1_name", "expected a byte[1][] holder");
    return $null;
  }
  $1 = &bytes;
  $2 = &len;
}
%typemap(argout) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) {
  jbyteArray value = (*jenv)->NewByteArray(jenv, (jsize)len$argnum);
  if (value) {
    if (len$argnum)
      (*jenv)->SetByteArrayRegion(jenv, value, 0, (jsize)len$argnum, (const jbyte *)bytes$argnum);
    (*jenv)->SetObjectArrayElement(jenv, $input, 0, value);
  }
}
%typemap(freearg) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) { free(bytes$argnum); }

/* A list of primitive arrays, reduced in place; counts are their lengths. */
%typemap(jni) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "jobjectArray"
%typemap(jtype) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "Object[]"
%typemap(jstype) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "Object[]"
%typemap(javain) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "$javainput"
%typemap(in) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N)
    (hbj_buf *held = NULL, jsize nheld = 0) {
  jsize i, n = $input ? (*jenv)->GetArrayLength(jenv, $input) : 0;
  if ((*jenv)->EnsureLocalCapacity(jenv, n + 16) < 0) return $null;
  held = (hbj_buf *)calloc((size_t)n + 1, sizeof(hbj_buf));
  $1 = ($1_ltype)calloc((size_t)n + 1, sizeof(void *));
  $2 = ($2_ltype)calloc((size_t)n + 1, sizeof(size_t));
  if (!held || !$1 || !$2) {
    hbj_illegal(jenv, "arrays", "out of memory");
    return $null;
  }
  for (i = 0; i < n; ++i) {
    jobject item = (*jenv)->GetObjectArrayElement(jenv, $input, i);
    if (!hbj_acquire(jenv, item, 0, &held[i], "arrays")) return $null;
    nheld = i + 1;
    if (!held[i].array) {
      hbj_illegal(jenv, "arrays", "allreduceMany takes primitive arrays only");
      return $null;
    }
    ((void **)$1)[i] = held[i].ptr;
    ((size_t *)$2)[i] = (size_t)held[i].elements;
  }
  $3 = (size_t)n;
}
%typemap(freearg) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) {
  jsize i;
  for (i = 0; i < nheld$argnum; ++i) hbj_release(jenv, &held$argnum[i], 1);
  free(held$argnum);
  free((void *)$1);
  free((void *)$2);
}

/* ---- Strings --------------------------------------------------------------- */
%typemap(jni) (const char *const *HB_STRINGS, size_t HB_N) "jobjectArray"
%typemap(jtype) (const char *const *HB_STRINGS, size_t HB_N) "String[]"
%typemap(jstype) (const char *const *HB_STRINGS, size_t HB_N) "String[]"
%typemap(javain) (const char *const *HB_STRINGS, size_t HB_N) "$javainput"
%typemap(in) (const char *const *HB_STRINGS, size_t HB_N)
    (const char **strings = NULL, jstring *jstrings = NULL, jsize nstrings = 0) {
  jsize i, n = $input ? (*jenv)->GetArrayLength(jenv, $input) : 0;
  if ((*jenv)->EnsureLocalCapacity(jenv, n + 16) < 0) return $null;
  strings = (const char **)calloc((size_t)n + 1, sizeof(char *));
  jstrings = (jstring *)calloc((size_t)n + 1, sizeof(jstring));
  if (!strings || !jstrings) {
    hbj_illegal(jenv, "$1_name", "out of memory");
    return $null;
  }
  for (i = 0; i < n; ++i) {
    jstrings[i] = (jstring)(*jenv)->GetObjectArrayElement(jenv, $input, i);
    if (!jstrings[i]) {
      hbj_illegal(jenv, "$1_name", "null element");
      return $null;
    }
    strings[i] = (*jenv)->GetStringUTFChars(jenv, jstrings[i], NULL);
    if (!strings[i]) return $null;
    nstrings = i + 1;
  }
  $1 = ($1_ltype)strings;
  $2 = (size_t)n;
}
%typemap(freearg) (const char *const *HB_STRINGS, size_t HB_N) {
  jsize i;
  for (i = 0; i < nstrings$argnum; ++i)
    (*jenv)->ReleaseStringUTFChars(jenv, jstrings$argnum[i], strings$argnum[i]);
  free(jstrings$argnum);
  free((void *)strings$argnum);
}

/* String results come back in a String[1] holder. */
%define HBJ_STRING_OUT(TYPE, FREE)
%typemap(jni) TYPE "jobjectArray"
%typemap(jtype) TYPE "String[]"
%typemap(jstype) TYPE "String[]"
%typemap(javain) TYPE "$javainput"
%typemap(in) TYPE ($*1_ltype s = NULL) {
  if (!$input || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    hbj_illegal(jenv, "$1_name", "expected a String[1] holder");
    return $null;
  }
  $1 = ($1_ltype)&s;
}
%typemap(argout) TYPE {
  if (s$argnum) {
    jstring value = (*jenv)->NewStringUTF(jenv, s$argnum);
    if (value) (*jenv)->SetObjectArrayElement(jenv, $input, 0, value);
  }
}
%typemap(freearg) TYPE { FREE; }
%enddef
HBJ_STRING_OUT(const char **HB_STATIC_STRING_OUT, (void)0)
HBJ_STRING_OUT(char **HB_STRING_OUT, free(s$argnum))

/* ---- Listener: an org.hb.Listener ------------------------------------------ */
%typemap(jni) (hb_listener_fn HB_FN, void *HB_USER_DATA) "jobject"
%typemap(jtype) (hb_listener_fn HB_FN, void *HB_USER_DATA) "Listener"
%typemap(jstype) (hb_listener_fn HB_FN, void *HB_USER_DATA) "Listener"
%typemap(javain) (hb_listener_fn HB_FN, void *HB_USER_DATA) "$javainput"
%typemap(in) (hb_listener_fn HB_FN, void *HB_USER_DATA) {
  if (!$input) {
    hbj_illegal(jenv, "listener", "null");
    return $null;
  }
  /* arg1 is the context of hb_context_add_listener, the only user. */
  $2 = hbj_listener_new(jenv, (hb_context *)arg1, $input);
  if (!$2) {
    hbj_illegal(jenv, "listener", "out of memory");
    return $null;
  }
  $1 = hbj_listener_call;
}

/* The configs with an optimizer share its setters and getters (OptimizerNative,
 * OptimizerSettings): one list of the optimizer fields in Java. */
%typemap(javainterfaces) struct hb_embedding_config, struct hb_ps_dense_config "OptimizerNative"

%include "hb.i"

%typemap(in, numinputs=0) JNIEnv *jenv %{ $1 = jenv; %}
%inline %{
/* After hb_context_destroy(ctx): forget its listeners. */
static void hbj_release_listeners(JNIEnv *jenv, hb_context *ctx) {
  hbj_listener **p;
  pthread_mutex_lock(&hbj_listeners_mu);
  for (p = &hbj_listeners; *p;) {
    hbj_listener *l = *p;
    if (l->ctx == ctx) {
      *p = l->next;
      (*jenv)->DeleteGlobalRef(jenv, l->target);
      free(l);
    } else {
      p = &l->next;
    }
  }
  pthread_mutex_unlock(&hbj_listeners_mu);
}
%}
