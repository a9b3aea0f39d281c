# A small convolutional network (LANGUAGE.md section 13): two `conv` layers (channels-last images, as
# JAX's ("NHWC", "HWIO", "NHWC") dimension numbers), relu, global average pooling and a dense layer,
# trained for a few steps by `grad` on a toy task (is the bright square in the left or the right half?).
# The images are drawn with explicit keys (section 12).

def features(x: f32[b, 8, 8, 1], w1: f32[3, 3, 1, 4], w2: f32[3, 3, 4, 8]) -> f32[b, 8]:
    h = relu(conv(x, w1, padding="SAME", layout=("NHWC", "HWIO", "NHWC")))
    h = relu(conv(h, w2, strides=2, padding="SAME", layout=("NHWC", "HWIO", "NHWC")))
    return mean(h, axis=(1, 2))

def loss(w1: f32[3, 3, 1, 4], w2: f32[3, 3, 4, 8], v: f32[8], x: f32[b, 8, 8, 1], y: f32[b]) -> f32:
    logits = features(x, w1, w2) @ v
    return mean(log(1.0 + exp(-y * logits)))

def images(k: key) -> (f32[64, 8, 8, 1], f32[64]):
    k_side, k_noise = split(k)
    side = uniform(k_side, (64,)) < 0.5
    cols = arange(8)
    left = (cols < 4).astype(f32)
    masks = where(expand_dims(side, 1), expand_dims(left, 0), expand_dims(1.0 - left, 0))
    x = expand_dims(expand_dims(masks, 1), 3) + 0.1 * normal(k_noise, (64, 8, 8, 1))
    return x, where(side, 1.0, -1.0)

def main() -> (f32, f32):
    k_data, k1, k2, k3 = split(key(3), 4)
    x, y = images(k_data)
    w1 = 0.5 * normal(k1, (3, 3, 1, 4))
    w2 = 0.3 * normal(k2, (3, 3, 4, 8))
    v = 0.3 * normal(k3, (8,))
    before = loss(w1, w2, v, x, y)
    for step in range(30):
        g1, g2, gv = grad(loss, argnums=(0, 1, 2))(w1, w2, v, x, y)
        w1 = w1 - 0.5 * g1
        w2 = w2 - 0.5 * g2
        v = v - 0.5 * gv
    return before, loss(w1, w2, v, x, y)
