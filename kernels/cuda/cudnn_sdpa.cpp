/* cuDNN's fused attention (cudnn_sdpa.h) over the cuDNN frontend's graph
 * API, for SG_ATTN=cudnn.
 *
 * Why a library here.  On Hopper and later, cuDNN's SDPA engines use the
 * instructions the tile kernels of attention_*_mma.cu do not (wgmma, TMA,
 * warp specialisation), and it has had the gpt-oss "sink token" (our
 * phantom logit) since 9.13: DESIGN.md's principle 7.  The tile kernels
 * stay for what it lacks: the routing-slot control's per-key log-bias
 * (whose gradient is a column sum of dS), head dims it refuses, and builds
 * or machines without cuDNN.
 *
 * Loading.  libcudnn is opened at run time (SG_CUDNN_LIB, else
 * "libcudnn.so.9" on the loader's path), through the frontend's dynamic
 * loading, so the CUDA build neither needs cuDNN to start nor links it: a
 * machine without it runs the tile kernels, and says so once.
 *
 * Graphs.  A graph is built (heuristics, support check, plan) for each
 * distinct shape, stride set and phantom, once, and cached with its
 * workspace size; a refusal is cached too, with its reason.  The pointers
 * are bound at each execution (the variant pack), so one graph serves
 * every layer.  The backward asks for the deterministic algorithm: two runs
 * give the same bits. */
#include "cudnn_sdpa.h"

#include <stdio.h>
#include <string.h>

#ifndef SG_CUDNN

static int sg_cudnn_unbuilt(char *why, size_t n) {
    snprintf(why, n, "this build has no cuDNN (make CUDNN=yes with cuDNN's headers and the frontend: docs/cuda.md)");
    return 1;
}
extern "C" int sg_cudnn_sdpa_fwd(const SgSdpa *, char *why, size_t n) { return sg_cudnn_unbuilt(why, n); }
extern "C" int sg_cudnn_sdpa_bwd(const SgSdpa *, char *why, size_t n) { return sg_cudnn_unbuilt(why, n); }
extern "C" int sg_cudnn_sdpa_check(const SgSdpa *, int, const char *, int, int *, char *why, size_t n) {
    sg_cudnn_unbuilt(why, n);
    return 2;
}

#else

#include <dlfcn.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "scratch.h"

namespace fe = cudnn_frontend;

/* the frontend's handle on the library it calls through (dynamic loading) */
void *cudnn_frontend::cudnn_dlhandle = nullptr;

namespace {

enum : int64_t { U_Q = 1, U_K, U_V, U_O, U_LSE, U_SINK, U_DO, U_DQ, U_DK, U_DV };

struct Lib {
    bool tried = false, loaded = false, handle_tried = false;
    cudnnHandle_t handle = nullptr;
    std::string why; /* why not loaded, or why there is no handle */
};

/* the library opened and recent enough (no GPU needed) */
Lib &load() {
    static Lib l;
    if (l.tried) return l;
    l.tried = true;
    const char *name = getenv("SG_CUDNN_LIB");
    if (!name || !*name) name = "libcudnn.so.9";
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        l.why = std::string("cannot load ") + name + " (" + (e ? e : "no reason given") +
                "; SG_CUDNN_LIB names the library)";
        return l;
    }
    fe::cudnn_dlhandle = h;
    try {
        const size_t v = fe::detail::get_backend_version();
        if (v < 91300) {
            l.why = "cuDNN " + std::to_string(v) + " is older than 9.13, the first with the sink token";
            return l;
        }
        l.loaded = true;
    } catch (const std::exception &ex) {
        l.why = std::string("cuDNN: ") + ex.what();
    }
    return l;
}

/* loaded, with a handle on the current GPU */
Lib &lib() {
    Lib &l = load();
    if (!l.loaded || l.handle_tried) return l;
    l.handle_tried = true;
    try {
        if (fe::detail::create_handle(&l.handle) != CUDNN_STATUS_SUCCESS) {
            l.handle = nullptr;
            l.why = "cudnnCreate failed";
        }
    } catch (const std::exception &ex) {
        l.handle = nullptr;
        l.why = std::string("cuDNN: ") + ex.what();
    }
    return l;
}

/* Everything a graph depends on: the shapes, every tensor's strides, the
 * phantom, the direction. */
struct Key {
    long v[40];
    int n;
    bool operator==(const Key &o) const { return n == o.n && !memcmp(v, o.v, sizeof(long) * n); }
};
struct KeyHash {
    size_t operator()(const Key &k) const {
        size_t h = 1469598103934665603ull;
        for (int i = 0; i < k.n; i++) h = (h ^ (size_t)k.v[i]) * 1099511628211ull;
        return h;
    }
};
void key_tensor(Key &k, const SgSdpaTensor &t) {
    k.v[k.n++] = t.bs, k.v[k.n++] = t.hs, k.v[k.n++] = t.rs;
}
Key make_key(const SgSdpa *s, bool bwd) {
    Key k;
    k.n = 0;
    k.v[k.n++] = bwd, k.v[k.n++] = s->B, k.v[k.n++] = s->H, k.v[k.n++] = s->T, k.v[k.n++] = s->d;
    k.v[k.n++] = s->sink != nullptr;
    uint32_t sc;
    memcpy(&sc, &s->scale, sizeof sc);
    k.v[k.n++] = sc;
    for (const SgSdpaTensor *t : {&s->q, &s->k, &s->v, &s->o}) key_tensor(k, *t);
    if (bwd)
        for (const SgSdpaTensor *t : {&s->dout, &s->dq, &s->dk, &s->dv}) key_tensor(k, *t);
    return k;
}

struct Built {
    std::shared_ptr<fe::graph::Graph> g; /* null: refused, for why */
    int64_t workspace = 0;
    std::string why;
};

std::shared_ptr<fe::graph::Tensor_attributes> bf16_tensor(fe::graph::Graph &g, const char *name, int64_t uid,
                                                          const SgSdpa *s, const SgSdpaTensor &t) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_data_type(fe::DataType_t::BFLOAT16)
                        .set_dim({s->B, s->H, s->T, s->d})
                        .set_stride({t.bs, t.hs, t.rs, 1}));
}
void as_output(const std::shared_ptr<fe::graph::Tensor_attributes> &x, int64_t uid, const SgSdpa *s,
               const SgSdpaTensor &t) {
    x->set_output(true)
        .set_uid(uid)
        .set_data_type(fe::DataType_t::BFLOAT16)
        .set_dim({s->B, s->H, s->T, s->d})
        .set_stride({t.bs, t.hs, t.rs, 1});
}
/* the LSE, [B, H, T, 1] fp32: the forward's output, the backward's input */
fe::graph::Tensor_attributes &as_lse(fe::graph::Tensor_attributes &x, const SgSdpa *s) {
    return x.set_name("lse")
        .set_uid(U_LSE)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({s->B, s->H, s->T, 1})
        .set_stride({(int64_t)s->H * s->T, s->T, 1, 1});
}

/* The graph's steps from validation to a built plan; the first failure's
 * message, else empty. */
std::string finish(fe::graph::Graph &g, cudnnHandle_t h, int64_t *ws) {
    fe::error_t e = g.validate();
    if (e.is_good()) e = g.build_operation_graph(h);
    if (e.is_good()) e = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (e.is_good()) e = g.check_support(h);
    if (e.is_good()) e = g.build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
    if (!e.is_good()) return e.get_message().empty() ? std::string("the graph was refused") : e.get_message();
    *ws = g.get_workspace_size();
    return std::string();
}

/* s's graph, described but not yet validated or built.  sm > 0: the
 * compute capability it is for (a node takes the graph's context as it is
 * added), else the current device's. */
std::shared_ptr<fe::graph::Graph> describe(const SgSdpa *s, bool bwd, int sm) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    if (sm > 0) g->set_sm_version(sm);
    auto Q = bf16_tensor(*g, "q", U_Q, s, s->q);
    auto K = bf16_tensor(*g, "k", U_K, s, s->k);
    auto V = bf16_tensor(*g, "v", U_V, s, s->v);
    std::shared_ptr<fe::graph::Tensor_attributes> sink;
    if (s->sink)
        sink = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("sink")
                             .set_uid(U_SINK)
                             .set_data_type(fe::DataType_t::FLOAT)
                             .set_dim({1, s->H, 1, 1})
                             .set_stride({s->H, 1, 1, 1}));
    if (!bwd) {
        auto opt = fe::graph::SDPA_attributes()
                       .set_name("sg_attention_fwd")
                       .set_generate_stats(true)
                       .set_causal_mask(true)
                       .set_attn_scale(s->scale);
        if (sink) opt.set_sink_token(sink);
        auto [O, L] = g->sdpa(Q, K, V, opt);
        as_output(O, U_O, s, s->o);
        as_lse(L->set_output(true), s);
    } else {
        auto O = bf16_tensor(*g, "o", U_O, s, s->o);
        auto dO = bf16_tensor(*g, "dout", U_DO, s, s->dout);
        fe::graph::Tensor_attributes la;
        auto L = g->tensor(as_lse(la, s));
        auto opt = fe::graph::SDPA_backward_attributes()
                       .set_name("sg_attention_bwd")
                       .set_causal_mask(true)
                       .set_attn_scale(s->scale)
                       .set_deterministic_algorithm(true);
        if (sink) opt.set_sink_token(sink);
        auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, L, opt);
        as_output(dQ, U_DQ, s, s->dq);
        as_output(dK, U_DK, s, s->dk);
        as_output(dV, U_DV, s, s->dv);
    }
    return g;
}

Built build(const SgSdpa *s, bool bwd, cudnnHandle_t h) {
    Built b;
    auto g = describe(s, bwd, 0);
    b.why = finish(*g, h, &b.workspace);
    if (b.why.empty()) b.g = g;
    return b;
}

int refuse(char *why, size_t n, const std::string &m) {
    snprintf(why, n, "%s", m.c_str());
    return 1;
}

/* the head dims cuDNN's attention has engines for (its validation says
 * the same of the backward; we ask neither direction otherwise) */
bool dims_taken(const SgSdpa *s) { return s->d % 8 == 0 && s->d <= 256; }
const char *const DIMS_WHY = "cuDNN's attention takes head dims that are multiples of 8 up to 256";

int run(const SgSdpa *s, bool bwd, char *why, size_t n) {
    if (!dims_taken(s)) return refuse(why, n, DIMS_WHY);
    try {
        Lib &l = lib();
        if (!l.handle) return refuse(why, n, l.why);
        static std::unordered_map<Key, Built, KeyHash> cache;
        const Key key = make_key(s, bwd);
        auto it = cache.find(key);
        if (it == cache.end()) {
            /* a build that throws is a refusal like any other: cached, so
             * that later calls do not try again */
            Built b;
            try {
                b = build(s, bwd, l.handle);
            } catch (const std::exception &ex) {
                b.why = std::string("cuDNN: ") + ex.what();
            }
            it = cache.emplace(key, std::move(b)).first;
        }
        const Built &b = it->second;
        if (!b.g) return refuse(why, n, b.why);
        std::unordered_map<int64_t, void *> ptr = {{U_Q, s->q.p}, {U_K, s->k.p}, {U_V, s->v.p}, {U_O, s->o.p},
                                                   {U_LSE, s->lse}};
        if (s->sink) ptr[U_SINK] = const_cast<float *>(s->sink);
        if (bwd) {
            ptr[U_DO] = s->dout.p;
            ptr[U_DQ] = s->dq.p, ptr[U_DK] = s->dk.p, ptr[U_DV] = s->dv.p;
        }
        void *ws = b.workspace > 0 ? sg_scratch(SCRATCH_CUDNN, (size_t)b.workspace) : nullptr;
        if (fe::detail::set_stream(l.handle, s->stream) != CUDNN_STATUS_SUCCESS) {
            snprintf(why, n, "cudnnSetStream refused the op stream");
            return 2;
        }
        fe::error_t e = b.g->execute(l.handle, ptr, ws);
        if (!e.is_good()) {
            snprintf(why, n, "%s", e.get_message().c_str());
            return 2;
        }
        return 0;
    } catch (const std::exception &ex) {
        return refuse(why, n, std::string("cuDNN: ") + ex.what());
    }
}

/* The deviceless check (cudnn_sdpa.h): describe() and finish()'s steps up to
 * the support check, with a described GPU in place of a handle (the
 * frontend would take the compute capability from the current device). */
int check(const SgSdpa *s, bool bwd, const char *devprops, int sm, int *engines, char *why, size_t n) {
    *engines = 0;
    if (!dims_taken(s)) return refuse(why, n, DIMS_WHY);
    try {
        Lib &l = load();
        if (!l.loaded) {
            snprintf(why, n, "%s", l.why.c_str());
            return 2;
        }
        auto dp = std::make_shared<fe::DeviceProperties>();
        std::vector<uint8_t> buf(devprops, devprops + strlen(devprops));
        fe::error_t e = dp->deserialize(buf);
        if (!e.is_good()) {
            snprintf(why, n, "cuDNN did not take the device properties: %s", e.get_message().c_str());
            return 2;
        }
        auto g = describe(s, bwd, sm);
        g->set_device_properties(dp);
        e = g->validate();
        if (e.is_good()) e = g->build_operation_graph();
        if (e.is_good()) e = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
        if (e.is_good()) e = g->check_support();
        if (!e.is_good()) return refuse(why, n, e.get_message().empty() ? "the graph was refused" : e.get_message());
        *engines = (int)g->get_execution_plan_count();
        std::string names;
        for (int i = 0; i < *engines; i++) {
            std::string name;
            if (!g->get_plan_name_at_index(i, name).is_good()) name = "?";
            names += (i ? " " : "") + name;
        }
        snprintf(why, n, "%s", names.c_str());
        return 0;
    } catch (const std::exception &ex) {
        return refuse(why, n, std::string("cuDNN: ") + ex.what());
    }
}

} // namespace

extern "C" int sg_cudnn_sdpa_check(const SgSdpa *s, int bwd, const char *devprops, int sm, int *engines, char *why,
                                   size_t n) {
    return check(s, bwd != 0, devprops, sm, engines, why, n);
}
extern "C" int sg_cudnn_sdpa_fwd(const SgSdpa *s, char *why, size_t n) { return run(s, false, why, n); }
extern "C" int sg_cudnn_sdpa_bwd(const SgSdpa *s, char *why, size_t n) { return run(s, true, why, n); }

#endif
