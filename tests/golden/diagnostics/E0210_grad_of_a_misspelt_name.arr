def loss(x: f64) -> f64:
    return x * x

def main(x: f64) -> f64:
    return grad(los)(x)
